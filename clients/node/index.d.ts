// Type declarations of idempotency-pg (README.md). Self-contained: no @types package is needed;
// the request, response and pool types are the parts of Express, Fastify and node-postgres
// the package uses.

type Factory = <Req extends idempotency.RequestLike = idempotency.RequestLike>(
  options: idempotency.Options<Req>) => idempotency.Idempotency;

/** Checks the options (throws TypeError on a mistake) and returns the middleware's factory. */
declare const idempotency: Factory & { readonly idempotency: Factory; readonly default: Factory };

declare namespace idempotency {
  /** node-postgres' pool (pg.Pool), as far as the package uses it. */
  interface PoolLike {
    query(...args: any[]): Promise<any>;
    connect(): Promise<any>;
  }

  /** The request as the principal and operation options see it (Express req, Fastify request). */
  interface RequestLike {
    method: string;
    headers: Record<string, string | string[] | undefined>;
    [name: string]: any;
  }

  type Mode = 'single' | 'two-phase' | 'off';

  interface Options<Req extends RequestLike = RequestLike> {
    /** node-postgres pool: the package's statements and the handler's transaction. */
    pool: PoolLike;
    /** Who sends the request (the authenticated user or account); null or undefined: 403. Required unless sharedKeySpace is true. */
    principal?: (req: Req) => string | number | null | undefined | Promise<string | number | null | undefined>;
    /** true: every principal shares one key space per operation. Default false. */
    sharedKeySpace?: boolean;
    /** The operation of a request. Default: the method and the route's template, "POST /v1/payments/:id". */
    operation?: (req: Req) => string | Promise<string>;
    /** 'single' (default): one transaction; 'two-phase': the claim commits first, with a lease; 'off': a plain transaction, nothing claimed. */
    mode?: Mode;
    /** Two-phase: the claim's lease in milliseconds (default 30000), renewed every leaseMs / 3 while the handler runs. */
    leaseMs?: number;
    /** How long the record is kept, milliseconds (default: the extension's idempotency.default_ttl); not below leaseMs. */
    ttlMs?: number;
    /** The response headers stored and replayed. Default ['Content-Type', 'Location']. */
    headers?: string[];
    /** true: the package's statements as named prepared statements (not behind PgBouncer < 1.21). Default false. */
    prepare?: boolean;
  }

  /** What the handler gets as req.idem (Express) or request.idem (Fastify). */
  interface Idem {
    /** client.query's arguments, in the request's transaction. */
    query(...args: any[]): Promise<any>;
    /** The parsed Idempotency-Key (null in mode off). */
    readonly key: string | null;
    /** The attempt's fencing token. */
    readonly attempt: number | null;
    /** true when an earlier attempt's lease ran out: its effect is unknown, reconcile first. */
    readonly reclaimed: boolean;
    /** The record's scope: the principal and the operation. */
    readonly scope: string | null;
    readonly mode: Mode;
    /** The record's resource_id; default the last path segment of the answer's Location. */
    resourceId: string | number | null | undefined;
  }

  type ExpressHandler = (req: any, res: any, next: (err?: unknown) => void) => unknown;
  type ExpressMiddleware = (req: any, res: any, next: (err?: unknown) => void) => Promise<void>;

  /** Route options for Fastify: app.post(path, idem.fastify(), handler). */
  interface FastifyRouteHooks {
    preParsing: (request: any, reply: any, payload: any) => Promise<any>;
    preHandler: (request: any, reply: any) => Promise<unknown>;
    onError: (request: any, reply: any, error: Error) => Promise<void>;
    onSend: (request: any, reply: any, payload: unknown) => Promise<unknown>;
    onResponse: (request: any, reply: any) => Promise<void>;
  }

  interface Idempotency {
    /** The checked options. */
    readonly options: Readonly<Options>;
    /** The start check: loads idem_http_errors and checks the grants; rejects with what is wrong. Await it before listen. */
    ready(): Promise<void>;
    /** The route's handler, wrapped: app.post(path, idem.express(async (req, res) => ...)). */
    express(handler: ExpressHandler): ExpressMiddleware;
    /** The route's hooks: app.post(path, idem.fastify(), handler). */
    fastify(): FastifyRouteHooks;
    /** app.register(idem.fastifyPlugin): ready() in onReady, so that a misconfiguration fails the app's start. */
    readonly fastifyPlugin: (app: any) => Promise<void>;
  }
}

export = idempotency;
