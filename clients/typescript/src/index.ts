export { AdminClient, MemoryClient, type UnaryMethods, type WatchOptions } from "./client.js";
export * from "./errors.js";
export { DEFAULT_RETRY, REPEATABLE_METHODS, type RetryPolicy } from "./retry.js";
export { channelTarget, type CallOptions, type ClientOptions } from "./transport.js";
export * from "./gen/memplane/v1/memory_pb.js";
export * from "./gen/memplane/v1/memory_service_pb.js";
export * from "./gen/memplane/v1/operation_pb.js";
export * from "./gen/memplane/v1/operations_service_pb.js";
export * from "./gen/memplane/v1/admin_service_pb.js";
