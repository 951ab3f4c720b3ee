// Errors a call raises: one class per gRPC status the server uses, carrying the stable reason of
// the server's google.rpc.ErrorInfo, its metadata, and the wait a RetryInfo asks for.
import { fromBinary } from "@bufbuild/protobuf";
import { anyIs, anyUnpack, durationMs } from "@bufbuild/protobuf/wkt";
import { Metadata, status as Code, type ServiceError } from "@grpc/grpc-js";
import { StatusSchema } from "./gen/google/rpc/status_pb.js";
import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";

const DETAILS_KEY = "grpc-status-details-bin";

export class MemplaneError extends Error {
  /** The gRPC status code's name, e.g. "INVALID_ARGUMENT". */
  readonly code: string;
  /** The server's stable UPPER_SNAKE reason (google.rpc.ErrorInfo), or "". */
  readonly reason: string;
  /** Key/value context of the ErrorInfo (e.g. the offending field). */
  readonly metadata: Readonly<Record<string, string>>;
  /** Milliseconds the server asked the client to wait (google.rpc.RetryInfo), or undefined. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, code: string, reason = "", metadata: Record<string, string> = {},
              retryAfterMs?: number) {
    super(`${code}${reason ? ` [${reason}]` : ""}: ${message}`);
    this.name = new.target.name;
    this.code = code;
    this.reason = reason;
    this.metadata = metadata;
    this.retryAfterMs = retryAfterMs;
  }
}

export class InvalidArgumentError extends MemplaneError {}
export class NotFoundError extends MemplaneError {}
export class AlreadyExistsError extends MemplaneError {}
export class PermissionDeniedError extends MemplaneError {}
export class UnauthenticatedError extends MemplaneError {}
export class ResourceExhaustedError extends MemplaneError {}
export class FailedPreconditionError extends MemplaneError {}
export class UnavailableError extends MemplaneError {}
export class AbortedError extends MemplaneError {}
export class DeadlineExceededError extends MemplaneError {}
export class CancelledError extends MemplaneError {}

const BY_CODE: Partial<Record<Code, typeof MemplaneError>> = {
  [Code.INVALID_ARGUMENT]: InvalidArgumentError,
  [Code.NOT_FOUND]: NotFoundError,
  [Code.ALREADY_EXISTS]: AlreadyExistsError,
  [Code.PERMISSION_DENIED]: PermissionDeniedError,
  [Code.UNAUTHENTICATED]: UnauthenticatedError,
  [Code.RESOURCE_EXHAUSTED]: ResourceExhaustedError,
  [Code.FAILED_PRECONDITION]: FailedPreconditionError,
  [Code.UNAVAILABLE]: UnavailableError,
  [Code.ABORTED]: AbortedError,
  [Code.DEADLINE_EXCEEDED]: DeadlineExceededError,
  [Code.CANCELLED]: CancelledError,
};

/** The MemplaneError for a failed call; mapping an error never fails itself. */
export function fromServiceError(error: Partial<ServiceError>): MemplaneError {
  const code = error.code ?? Code.UNKNOWN;
  let reason = "";
  let metadata: Record<string, string> = {};
  let retryAfterMs: number | undefined;
  const raw = error.metadata instanceof Metadata ? error.metadata.get(DETAILS_KEY)[0] : undefined;
  if (raw instanceof Buffer) {
    try {
      for (const detail of fromBinary(StatusSchema, raw).details) {
        if (anyIs(detail, ErrorInfoSchema)) {
          const info = anyUnpack(detail, ErrorInfoSchema)!;
          reason = info.reason;
          metadata = { ...info.metadata };
        } else if (anyIs(detail, RetryInfoSchema)) {
          const delay = anyUnpack(detail, RetryInfoSchema)!.retryDelay;
          retryAfterMs = delay ? durationMs(delay) : undefined;
        }
      }
    } catch {
      // Details that do not parse leave the code and message, which still say what went wrong.
    }
  }
  const Class = BY_CODE[code] ?? MemplaneError;
  return new Class(error.details || error.message || "call failed", Code[code] ?? "UNKNOWN", reason, metadata,
                   retryAfterMs);
}
