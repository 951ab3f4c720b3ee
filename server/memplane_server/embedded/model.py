"""A local chat model as a child process: llama.cpp's OpenAI-compatible server (PyPI
llama-cpp-python, `python -m llama_cpp.server`) on loopback, private to one data dir, so that
reflection and extraction run with no provider (MEMPLANE_LOCAL_MODEL).

It serves one request at a time on MEMPLANE_LOCAL_MODEL_THREADS threads at the lowest CPU priority
(nice 19): a Search or a Write that needs the CPU gets it first, and the model's work waits. The
calls reach it through litellm like any provider's, with a key only this data dir holds.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from ._process import (
    EmbeddedError,
    file_tail,
    free_loopback_port,
    make_private_dir,
    read_or_create_secret,
    read_pid_file,
    running_in,
    terminate,
    wait_until,
    write_private_file,
)
from .service import EmbeddedService

logger = logging.getLogger(__name__)

# Loading 1.1 GB of weights from a cold disk on a busy 2-core machine took up to 40 s.
_READY_TIMEOUT = 180.0
_STOP_TIMEOUT = 15.0
_ABANDONED_GRACE = 5.0
# Prompts of the LLM stages stay under 3,000 tokens (extraction's known facts and turns are
# bounded); 4,096 leaves their answers room, and the KV cache at this size is about 110 MB.
CONTEXT_TOKENS = 4096
# The litellm model name the stages use for it: an OpenAI-compatible server at api_base.
LITELLM_MODEL = "openai/local"


class EmbeddedModel(EmbeddedService):
    """llama.cpp's server for one GGUF file, its key and log in `data_dir/model`."""

    name = "Model"

    def __init__(self, data_dir: Path, model: Path | None = None, threads: int = 1) -> None:
        self._dir = Path(data_dir).absolute() / "model"
        super().__init__(self._dir)
        self._model = model
        self._threads = threads
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def api_base(self) -> str | None:
        return self._address

    @property
    def api_key(self) -> str:
        return read_or_create_secret(self._dir / "api_key")

    def _prepare(self) -> None:
        make_private_dir(self._dir)
        if self._model is None or not self._model.is_file():
            raise EmbeddedError(f"MEMPLANE_LOCAL_MODEL: no model file at {self._model}")

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def _log(self) -> Path:
        return self._dir / "model.log"

    @property
    def _pid_file(self) -> Path:
        return self._dir / "model.pid"

    def _launch(self) -> str:
        assert self._model is not None, "checked by _prepare"
        port = self._port or free_loopback_port()
        config = self._dir / "server.json"
        # The key in a 0600 file rather than on the command line, which every local user can read.
        write_private_file(config, json.dumps({
            "host": "127.0.0.1", "port": port, "api_key": self.api_key,
            "models": [{"model": str(self._model.resolve()), "model_alias": "local", "n_ctx": CONTEXT_TOKENS,
                        "n_threads": self._threads, "n_threads_batch": self._threads, "verbose": False}],
        }))
        with self._log.open("ab") as log:
            try:
                # nice(1) rather than a preexec_fn, which is unsafe in a process with threads (the
                # supervisor restarts it from one); the model's threads inherit the priority.
                self._process = subprocess.Popen(
                    ["nice", "-n", "19", sys.executable, "-m", "llama_cpp.server", "--config_file", str(config)],
                    cwd=self._dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as error:
                raise EmbeddedError(f"cannot run llama_cpp.server: {error}") from error
        write_private_file(self._pid_file, f"{self._process.pid}\n")
        try:
            self._wait_ready(self._process, port)
        except BaseException:
            self._process.kill()
            self._process.wait()
            self._process = None
            raise
        self._port = port
        logger.info("local model %s served on 127.0.0.1:%d", self._model.name, port)
        return f"http://127.0.0.1:{port}/v1"

    def _wait_ready(self, process: subprocess.Popen[bytes], port: int) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models",
                                         headers={"Authorization": f"Bearer {self.api_key}"})

        def answers() -> bool:
            if process.poll() is not None:
                raise EmbeddedError(f"llama_cpp.server exited with status {process.returncode}:\n{file_tail(self._log)}")
            try:
                with urllib.request.urlopen(request, timeout=2) as response:
                    return response.status == 200
            except (urllib.error.URLError, OSError):
                return False

        if not wait_until(answers, _READY_TIMEOUT, interval=0.5):
            raise EmbeddedError(f"llama_cpp.server did not answer within {_READY_TIMEOUT:.0f}s:\n{file_tail(self._log)}")

    def _shutdown(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        self._pid_file.unlink(missing_ok=True)
        logger.info("local model stopped")

    def stop_abandoned(self) -> None:
        """Stop the model server of this folder after its owner died."""
        pid = read_pid_file(self._pid_file)
        if pid is not None and running_in(pid, self._dir):
            logger.warning("stopping the local model (pid %d): the server that ran it is gone", pid)
            terminate(pid, self._dir, (signal.SIGTERM, signal.SIGKILL), _ABANDONED_GRACE)

    def _stop_leftover(self) -> None:
        pid = read_pid_file(self._pid_file)
        if pid is not None and running_in(pid, self._dir):
            logger.warning("stopping the local model (pid %d) left running by an earlier run", pid)
            if not terminate(pid, self._dir, (signal.SIGTERM, signal.SIGKILL), _STOP_TIMEOUT):
                raise EmbeddedError(f"the local model (pid {pid}) left by an earlier run did not stop")
