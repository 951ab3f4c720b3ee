// The retry policy, the same as the Python SDK's: jittered backoff within the call's deadline and
// a budget, reads and settings repeated as they are, every other call only with its request id.
import { MemplaneError } from "./errors.js";

/** Calls safe to send again as they are (the Python SDK's REPEATABLE_METHODS and
 * proto/memplane/v1/service_config.json: a test holds the three equal). */
export const REPEATABLE_METHODS: ReadonlySet<string> = new Set([
  "Search", "GetMemory", "ListMemories", "ListMemoryHistory", "GetWorkingMemory", "GetStats",
  "ListConflicts", "Foresee", "ListReflectionDecisions", "Watch",
  "GetTenant", "ListTenants", "ListAgents", "ListApiKeys", "ListDomains", "ListDomainGrants",
  "ListAuditEvents", "GetLifecyclePolicy", "GetContentPolicy", "ScanContentPolicy", "GetTokenUsage", "GetUsage",
  "SetLifecyclePolicy", "SetContentPolicy", "SetTokenBudget",
  "GetOperation", "ListOperations",
]);

export interface RetryPolicy {
  /** Tries in all, the first included; 1 disables retries. Unset: as many as the budget allows. */
  maxAttempts?: number;
  /** Milliseconds, from the first try, within which retries may start (20 s outlasts a restart). */
  budgetMs: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
  /** CANCELLED not caused by this client is retried too: a stopping server cancels what reaches it. */
  retryableCodes: ReadonlySet<string>;
}

export const DEFAULT_RETRY: RetryPolicy = {
  budgetMs: 20_000, initialBackoffMs: 100, maxBackoffMs: 2_000, multiplier: 2,
  retryableCodes: new Set(["UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED", "CANCELLED"]),
};

/** Whether a call may be retried at all: repeatable ones always, others with a request id. */
export function isRetryableCall(method: string, request: object): boolean {
  return REPEATABLE_METHODS.has(method) || Boolean((request as { requestId?: string }).requestId);
}

/** One logical call's attempts, against its deadline and the policy's budget. */
export class RetryState {
  private attempts = 0;
  private readonly started = Date.now();

  constructor(private readonly policy: RetryPolicy, private readonly retryable: boolean,
              readonly deadline: number | undefined, private readonly random: () => number = Math.random) {}

  /** The wait before the next try, or undefined when there is none to make. */
  delayBeforeRetry(error: MemplaneError): number | undefined {
    this.attempts += 1;
    if (!this.retryable || !this.policy.retryableCodes.has(error.code)) return undefined;
    if (this.policy.maxAttempts !== undefined && this.attempts >= this.policy.maxAttempts) return undefined;
    const ceiling = Math.min(this.policy.maxBackoffMs,
                             this.policy.initialBackoffMs * this.policy.multiplier ** (this.attempts - 1));
    const delay = error.retryAfterMs ?? this.random() * ceiling;
    const now = Date.now();
    if (now + delay > this.started + this.policy.budgetMs) return undefined;
    if (this.deadline !== undefined && now + delay >= this.deadline) return undefined;
    return delay;
  }
}

