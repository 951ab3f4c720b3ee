// The clients: every RPC of a service as a typed method (request in, response out, the generated
// protobuf-es shapes), plus what a loop needs: pages walked, a watch that resumes, an operation
// awaited. Async only, as in Node every call is.
import type { DescMethod, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { AdminService, type SetContentPolicyResponse,
         type SetTokenBudgetResponse } from "./gen/memplane/v1/admin_service_pb.js";
import type { Memory } from "./gen/memplane/v1/memory_pb.js";
import { MemoryService, WatchRequestSchema, type ChangeEvent, type EraseMode, type ForgetResponse,
         type MemoryInputSchema,
         type ListMemoriesRequestSchema, type ListMemoryHistoryRequestSchema, type ListMemoryHistoryResponse,
         type WatchFilterSchema } from "./gen/memplane/v1/memory_service_pb.js";
import { OperationState, type Operation } from "./gen/memplane/v1/operation_pb.js";
import { OperationsService } from "./gen/memplane/v1/operations_service_pb.js";
import { create } from "@bufbuild/protobuf";
import { DeadlineExceededError, fromServiceError, MemplaneError } from "./errors.js";
import { RetryState } from "./retry.js";
import { Transport, type CallOptions, type ClientOptions } from "./transport.js";

/** The unary RPCs of a service as methods: `write(request, {timeoutMs})` for `Write`. */
export type UnaryMethods<T extends GenServiceMethods> = {
  [K in keyof T as T[K]["methodKind"] extends "unary" ? K : never]:
    (request: MessageInitShape<T[K]["input"]>, options?: CallOptions) => Promise<MessageShape<T[K]["output"]>>;
};

type MemoryRpcs = typeof MemoryService extends GenService<infer T> ? T : never;
type OperationsRpcs = typeof OperationsService extends GenService<infer T> ? T : never;
type AdminRpcs = typeof AdminService extends GenService<infer T> ? T : never;

function bind(target: object, transport: Transport, services: GenService<GenServiceMethods>[]): void {
  for (const service of services) {
    for (const [name, method] of Object.entries(service.method)) {
      if (method.methodKind !== "unary") continue;
      Object.defineProperty(target, name, {
        value: (request: Record<string, unknown>, options?: CallOptions) =>
          transport.unary(method as DescMethod & never, request, options),
      });
    }
  }
}

export interface WatchOptions {
  /** Resume after this position (a ChangeEvent's or WatchResponse's); left out: from now. */
  afterPosition?: bigint;
  /** Milliseconds the whole watch may last; left out: no limit. */
  timeoutMs?: number;
  /** Reopen a broken stream after the last position handed over (default true). */
  resume?: boolean;
}

abstract class ClientBase {
  protected readonly transport: Transport;

  constructor(target: string | readonly string[], options: ClientOptions) {
    this.transport = new Transport(target, options);
  }

  /** Closes the connection; calls in flight end CANCELLED and are not retried. */
  close(): void {
    this.transport.close();
  }
}

export interface MemoryClient extends UnaryMethods<MemoryRpcs>, UnaryMethods<OperationsRpcs> {}

/** Memories and operations: Write, Search, Reflect, Forget and every other MemoryService and
 * OperationsService RPC, with `watch`, `iterMemories` and `waitOperation`. */
export class MemoryClient extends ClientBase {
  constructor(target: string | readonly string[], options: ClientOptions) {
    super(target, options);
    bind(this, this.transport, [MemoryService, OperationsService] as GenService<GenServiceMethods>[]);
  }

  /** Stores one memory; returns it as stored (or the memory it was merged into). */
  async writeOne(memory: MessageInitShape<typeof MemoryInputSchema>,
                 { requestId, ...options }: CallOptions & { requestId?: string } = {}): Promise<Memory> {
    const { memories } = await this.write({ memories: [memory], requestId }, options);
    return memories[0]!;
  }

  /** Erases everything about a user that the key reaches (Forget with `eraseUserId`, always hard):
   * the receipt, or for a large erasure or `mode` ASYNC the operation to wait on. */
  async eraseUser(userId: string,
                  { mode, dryRun = false, reason = "", requestId, ...options }:
                    CallOptions & { mode?: EraseMode; dryRun?: boolean; reason?: string; requestId?: string } = {},
  ): Promise<ForgetResponse> {
    if (!userId) throw new TypeError("eraseUser needs a userId");
    return this.forget({ target: { case: "eraseUserId", value: userId }, hard: true, dryRun, reason, requestId,
                        eraseMode: mode }, options);
  }

  /** One page of the recorded changes of a memory or an entity (ListMemoryHistory), as the Python
   * clients' `list_history`. */
  listHistory(request: MessageInitShape<typeof ListMemoryHistoryRequestSchema>,
              options?: CallOptions): Promise<ListMemoryHistoryResponse> {
    return this.listMemoryHistory(request, options);
  }

  /** Every memory the filter matches, page by page. */
  async *iterMemories(request: MessageInitShape<typeof ListMemoriesRequestSchema> = {},
                      options?: CallOptions): AsyncGenerator<Memory> {
    let pageToken = request.pageToken ?? "";
    do {
      const page = await this.listMemories({ ...request, pageToken }, options);
      yield* page.memories;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Every change this caller may see, live; reopens a broken stream after the last position
   * handed over, with the retry policy (its budget starting again with every response). */
  async *watch(filter: MessageInitShape<typeof WatchFilterSchema> = {},
               options: WatchOptions = {}): AsyncGenerator<ChangeEvent> {
    let position = options.afterPosition;
    const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
    let state = new RetryState(this.transport.retryPolicy, options.resume ?? true, deadline);
    for (;;) {
      const request = create(WatchRequestSchema, { filter, afterPosition: position });
      const stream = this.transport.stream(MemoryService.method.watch, request, deadline);
      try {
        for await (const response of stream) {
          state = new RetryState(this.transport.retryPolicy, options.resume ?? true, deadline);
          for (const event of response.events) {
            position = event.position;
            yield event;
          }
          position = response.position;
        }
        return;
      } catch (error) {
        const failed = error instanceof MemplaneError ? error : fromServiceError(error as never);
        const wait = this.transport.isClosed ? undefined : state.delayBeforeRetry(failed);
        if (wait === undefined) throw failed;
        await new Promise((resolve) => setTimeout(resolve, wait));
      } finally {
        stream.cancel();
      }
    }
  }

  /** Polls an operation until it is done; DeadlineExceededError past timeoutMs. */
  async waitOperation(id: string, { pollMs = 500, timeoutMs = 60_000 } = {}): Promise<Operation> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const { operation } = await this.getOperation({ id });
      if (operation && ![OperationState.PENDING, OperationState.RUNNING].includes(operation.state)) return operation;
      if (Date.now() + pollMs > until) {
        throw new DeadlineExceededError(`operation ${id} not done after ${timeoutMs} ms`, "DEADLINE_EXCEEDED");
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }
}

export interface AdminClient extends UnaryMethods<AdminRpcs> {}

/** Tenants, agents, keys, domains, grants, policies and token budgets (AdminService). */
export class AdminClient extends ClientBase {
  constructor(target: string | readonly string[], options: ClientOptions) {
    super(target, options);
    bind(this, this.transport, [AdminService] as GenService<GenServiceMethods>[]);
  }

  /** Sets every detector of a tenant's (or, with `domain`, a domain's) content policy back to its
   * default (SetContentPolicy with `reset`); an empty tenant: the caller's. */
  resetContentPolicy(tenantId = "", { domain = "", ...options }: CallOptions & { domain?: string } = {},
  ): Promise<SetContentPolicyResponse> {
    return this.setContentPolicy({ policy: { tenantId, domain }, reset: true }, options);
  }

  /** Takes a tenant's token budget back to the deployment's default (SetTokenBudget with `reset`). */
  resetTokenBudget(tenantId: string, options?: CallOptions): Promise<SetTokenBudgetResponse> {
    return this.setTokenBudget({ tenantId, reset: true }, options);
  }
}
