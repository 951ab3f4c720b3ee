// The client's own rules without a server: retry decisions, targets, error mapping.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { anyPack, durationFromMs } from "@bufbuild/protobuf/wkt";
import { Metadata, status as Code } from "@grpc/grpc-js";
import { StatusSchema } from "../src/gen/google/rpc/status_pb.js";
import { ErrorInfoSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { DEFAULT_RETRY, isRetryableCall, RetryState } from "../src/retry.js";
import { channelTarget } from "../src/transport.js";
import { fromServiceError, InvalidArgumentError, MemplaneError, ResourceExhaustedError, UnavailableError } from "../src/errors.js";

const unavailable = new UnavailableError("down", "UNAVAILABLE");

test("a read is retried as it is, a mutation only with its request id", () => {
  assert.ok(isRetryableCall("Search", {}));
  assert.ok(!isRetryableCall("Write", { requestId: "" }));
  assert.ok(isRetryableCall("Write", { requestId: "r-1" }));
  assert.ok(!isRetryableCall("ResolveConflict", {}));
});

test("waits grow with full jitter up to the ceiling", () => {
  const state = new RetryState(DEFAULT_RETRY, true, undefined, () => 0.999);
  const waits = [1, 2, 3, 4, 5, 6].map(() => state.delayBeforeRetry(unavailable)!);
  assert.deepEqual(waits.map((w) => Math.round(w)), [100, 200, 400, 799, 1598, 1998]);
});

test("a code outside the policy, or a call not retryable, is not retried", () => {
  assert.equal(new RetryState(DEFAULT_RETRY, true, undefined).delayBeforeRetry(
    new InvalidArgumentError("bad", "INVALID_ARGUMENT")), undefined);
  assert.equal(new RetryState(DEFAULT_RETRY, false, undefined).delayBeforeRetry(unavailable), undefined);
});

test("max attempts count the first try", () => {
  const state = new RetryState({ ...DEFAULT_RETRY, maxAttempts: 2 }, true, undefined, () => 0);
  assert.equal(state.delayBeforeRetry(unavailable), 0);
  assert.equal(state.delayBeforeRetry(unavailable), undefined);
});

test("no retry starts past the call's deadline or the budget", () => {
  assert.equal(new RetryState(DEFAULT_RETRY, true, Date.now() + 50, () => 0.999).delayBeforeRetry(
    new UnavailableError("down", "UNAVAILABLE", "", {}, 100)), undefined);
  assert.equal(new RetryState({ ...DEFAULT_RETRY, budgetMs: 10 }, true, undefined).delayBeforeRetry(
    new ResourceExhaustedError("slow down", "RESOURCE_EXHAUSTED", "RATE_LIMITED", {}, 1000)), undefined);
});

test("the server's retry-after is the wait", () => {
  const state = new RetryState(DEFAULT_RETRY, true, undefined, () => 0);
  assert.equal(state.delayBeforeRetry(new ResourceExhaustedError("slow", "RESOURCE_EXHAUSTED", "", {}, 750)), 750);
});

test("several addresses become one round-robin target; a host name in a list is refused", () => {
  assert.equal(channelTarget(["10.0.0.1:50051", "10.0.0.2:50051"]), "ipv4:10.0.0.1:50051,10.0.0.2:50051");
  assert.equal(channelTarget(["[::1]:50051"]), "ipv6:[::1]:50051");
  assert.equal(channelTarget("dns:///memplane:50051"), "dns:///memplane:50051");
  assert.throws(() => channelTarget(["memplane:50051"]), /IP addresses/);
  assert.throws(() => channelTarget(["10.0.0.1"]), /port/);
  assert.throws(() => channelTarget(["10.0.0.1:1", "[::1]:1"]), /not both/);
});

test("an error's details give its class, reason, metadata and retry-after", () => {
  const status = create(StatusSchema, { code: Code.RESOURCE_EXHAUSTED, message: "too many", details: [
    anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason: "RATE_LIMITED", metadata: { limit: "10" } })),
    anyPack(RetryInfoSchema, create(RetryInfoSchema, { retryDelay: durationFromMs(1500) })),
  ] });
  const metadata = new Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from(toBinary(StatusSchema, status)));
  const error = fromServiceError({ code: Code.RESOURCE_EXHAUSTED, details: "too many", metadata });
  assert.ok(error instanceof ResourceExhaustedError && error instanceof MemplaneError);
  assert.deepEqual([error.code, error.reason, error.metadata, error.retryAfterMs],
                   ["RESOURCE_EXHAUSTED", "RATE_LIMITED", { limit: "10" }, 1500]);
  assert.equal(error.message, "RESOURCE_EXHAUSTED [RATE_LIMITED]: too many");
});

test("details that do not parse leave the code and the message", () => {
  const metadata = new Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from([0xff, 0xff, 0xff]));
  const error = fromServiceError({ code: Code.UNAVAILABLE, details: "down", metadata });
  assert.ok(error instanceof UnavailableError);
  assert.deepEqual([error.code, error.reason], ["UNAVAILABLE", ""]);
});
