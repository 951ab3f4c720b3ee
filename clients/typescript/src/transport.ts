// Calls over one gRPC channel: protobuf-es messages on @grpc/grpc-js, with the API key, the
// deadline, retries with the request id set once per logical call, read-your-writes positions,
// and errors mapped to MemplaneError.
import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type DescService,
         type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { Client, credentials as grpcCredentials, Metadata, type ChannelCredentials,
         type ClientReadableStream, type ServiceError } from "@grpc/grpc-js";
import { randomUUID } from "node:crypto";
import { fromServiceError, MemplaneError } from "./errors.js";
import { DEFAULT_RETRY, isRetryableCall, RetryState, type RetryPolicy } from "./retry.js";

export interface ClientOptions {
  /** The API key secret, sent as `authorization: Bearer <key>`. */
  apiKey: string;
  /** The agent to act as, for a key not bound to one (`x-memplane-agent`). */
  agentId?: string;
  retry?: Partial<RetryPolicy>;
  /** Milliseconds a call may take, retries included, unless it passes its own; null: no limit. */
  defaultTimeoutMs?: number | null;
  /** TLS credentials; plaintext when left out. */
  credentials?: ChannelCredentials;
}

export interface CallOptions {
  /** Milliseconds this call may take, retries included. */
  timeoutMs?: number | null;
}

// Read-your-writes on standbys: the server says where the primary's log stood after a change,
// and a read a standby may serve sends the furthest position this client was told.
const WRITTEN_UP_TO = "x-memplane-written-up-to";
const READ_AFTER = "x-memplane-read-after";
const STANDBY_READS = new Set(["Search", "GetMemory", "ListMemories"]);

const CHANNEL_OPTIONS = {
  "grpc.primary_user_agent": "memplane-typescript/0.1.0",
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.min_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
  // Servers are stateless replicas: spread calls over every address the target resolves to.
  "grpc.service_config": JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
};

/** The gRPC target of one address or target, or of several IP addresses balanced round robin. */
export function channelTarget(target: string | readonly string[]): string {
  if (typeof target === "string") return target;
  if (target.length === 0) throw new TypeError("target needs at least one address");
  const families = new Set(target.map((address) => {
    const host = address.slice(0, address.lastIndexOf(":")).replace(/^\[|\]$/g, "");
    if (!/^\d+$/.test(address.slice(address.lastIndexOf(":") + 1))) {
      throw new TypeError(`${address}: the port is missing`);
    }
    if (/^\d{1,3}(\.\d{1,3}){3}$/.test(host)) return 4;
    if (host.includes(":")) return 6;
    throw new TypeError(`${address}: a list of targets takes IP addresses; give a host name as one target,`
                        + " e.g. 'dns:///NAME:PORT'");
  }));
  if (families.size > 1) throw new TypeError("a list of targets takes IPv4 or IPv6 addresses, not both");
  return `ipv${[...families][0]}:${target.join(",")}`;
}

function path(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

export class Transport {
  private readonly client: Client;
  private readonly metadata: Metadata;
  private readonly retry: RetryPolicy;
  private readonly defaultTimeoutMs: number | null;
  private writtenUpTo: string | undefined;
  private closed = false;

  constructor(target: string | readonly string[], options: ClientOptions) {
    const key = options.apiKey?.trim();
    if (!key) throw new TypeError("apiKey must be a non-empty string");
    this.metadata = new Metadata();
    this.metadata.set("authorization", `Bearer ${key}`);
    if (options.agentId !== undefined) {
      if (!options.agentId.trim()) throw new TypeError("agentId must be non-empty when given");
      this.metadata.set("x-memplane-agent", options.agentId.trim());
    }
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.defaultTimeoutMs = options.defaultTimeoutMs === undefined ? 30_000 : options.defaultTimeoutMs;
    this.client = new Client(channelTarget(target), options.credentials ?? grpcCredentials.createInsecure(),
                             CHANNEL_OPTIONS);
  }

  /** One logical call: retried per the policy with the same request (and request id). */
  async unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethod & { input: I; output: O }, init: MessageInitShape<I>, options: CallOptions = {},
  ): Promise<MessageShape<O>> {
    const request = create(method.input, init) as MessageShape<I>;
    if ("requestId" in request && !request.requestId) (request as { requestId: string }).requestId = randomUUID();
    const timeout = options.timeoutMs === undefined ? this.defaultTimeoutMs : options.timeoutMs;
    const deadline = timeout === null ? undefined : Date.now() + timeout;
    const state = new RetryState(this.retry, isRetryableCall(method.name, request), deadline);
    for (;;) {
      try {
        return await this.attempt(method, request, deadline);
      } catch (error) {
        const failed = error instanceof MemplaneError ? error : fromServiceError(error as ServiceError);
        const wait = this.closed ? undefined : state.delayBeforeRetry(failed);
        if (wait === undefined) throw failed;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  private attempt<I extends DescMessage, O extends DescMessage>(
    method: DescMethod & { input: I; output: O }, request: MessageShape<I>, deadline: number | undefined,
  ): Promise<MessageShape<O>> {
    const metadata = this.metadata.clone();
    if (this.writtenUpTo !== undefined && STANDBY_READS.has(method.name)) metadata.set(READ_AFTER, this.writtenUpTo);
    return new Promise((resolve, reject) => {
      const call = this.client.makeUnaryRequest(
        path(method), (message: MessageShape<I>) => Buffer.from(toBinary(method.input, message)),
        (bytes: Buffer) => fromBinary(method.output, bytes), request, metadata,
        deadline === undefined ? {} : { deadline: new Date(deadline) },
        (error: ServiceError | null, response?: MessageShape<O>) => {
          if (error) reject(fromServiceError(error));
          else resolve(response!);
        });
      call.on("status", (status) => this.learn(status.metadata));
    });
  }

  /** A server-streaming call; the caller resumes it (Watch keeps its own position). */
  stream<I extends DescMessage, O extends DescMessage>(
    method: DescMethod & { input: I; output: O }, request: MessageShape<I>, deadline: number | undefined,
  ): ClientReadableStream<MessageShape<O>> {
    return this.client.makeServerStreamRequest(
      path(method), (message: MessageShape<I>) => Buffer.from(toBinary(method.input, message)),
      (bytes: Buffer) => fromBinary(method.output, bytes), request, this.metadata.clone(),
      deadline === undefined ? {} : { deadline: new Date(deadline) });
  }

  get retryPolicy(): RetryPolicy {
    return this.retry;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private learn(trailers: Metadata): void {
    for (const value of trailers.get(WRITTEN_UP_TO)) {
      if (typeof value === "string" && /^[0-9A-Fa-f]+\/[0-9A-Fa-f]+$/.test(value)
          && (this.writtenUpTo === undefined || order(value) > order(this.writtenUpTo))) {
        this.writtenUpTo = value;
      }
    }
  }

  close(): void {
    this.closed = true;
    this.client.close();
  }
}

function order(position: string): bigint {
  const [high, low] = position.split("/");
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

