// The live page: rows for the changes streamed by /live/events (server-sent events from Watch).
// Every value goes in through textContent, never as markup, so memory content cannot run as code.
"use strict";
(function () {
  const table = document.getElementById("live");
  const status = document.getElementById("live-status");
  const body = table.querySelector("tbody");
  const source = new EventSource(table.dataset.stream);

  function cell(row, text) {
    const td = row.insertCell();
    td.textContent = text;
    return td;
  }

  source.addEventListener("open", function () { status.textContent = "live"; });
  source.addEventListener("error", function () { status.textContent = "reconnecting…"; });
  source.addEventListener("failed", function (message) {
    status.textContent = "stopped: " + JSON.parse(message.data).error;
    source.close();
  });
  source.addEventListener("change", function (message) {
    const change = JSON.parse(message.data);
    const row = body.insertRow(0);
    row.dataset.memoryId = change.memory_id;
    row.className = "change-" + change.change;
    cell(row, change.time);
    cell(row, change.change);
    cell(row, change.kind);
    cell(row, change.scope);
    const link = document.createElement("a");
    link.href = "/memories/" + encodeURIComponent(change.memory_id);
    link.textContent = change.content || change.memory_id;
    cell(row, "").appendChild(link);
    cell(row, change.entity);
    cell(row, change.session_id);
  });
})();
