/**
 * Starting and stopping the service as a process: open the context, build the app, listen; on SIGTERM or
 * SIGINT stop accepting connections, let in-flight requests finish, close the pools, exit 0. Kept apart
 * from `main.ts` so that tests can run the same sequence in a child process with a route of their own.
 */

import type http from 'node:http';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { SealedKeyMismatch } from './auth/startup.ts';
import { runCli } from './cli/main.ts';
import { type CliSocket, serveCliSocket } from './cli/remote.ts';
import type { Config } from './config.ts';
import { type AppContext, closeContext, createContext } from './context.ts';
import { DatabaseInUse } from './db/database.ts';
import { applyHasuraMetadata } from './hasura/metadata.ts';
import { outboxDir } from './mail/mailer.ts';
import { startBanner } from './start-banner.ts';

export interface RunningServer {
  app: FastifyInstance;
  ctx: AppContext;
  /** The address the server listens on, e.g. `http://127.0.0.1:3000`. */
  address: string;
  /** Makes every response still in flight the last one on its connection. */
  drain(): void;
  /** The socket the CLI reaches the embedded database through (remote.ts); none with DATABASE_URL. */
  cliSocket?: CliSocket | undefined;
}

/**
 * Node closes idle keep-alive connections when the server closes, but a connection whose request is still
 * running stays open after its response (until the keep-alive timeout), which would hold the shutdown
 * for as long. Responses in flight at shutdown therefore close their connection once sent.
 */
function trackInFlight(server: http.Server): () => void {
  const inFlight = new Set<http.ServerResponse>();
  server.on('request', (_req, res: http.ServerResponse) => {
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
  });
  return () => {
    for (const res of inFlight) {
      if (!res.headersSent) res.shouldKeepAlive = false;
      else {
        // Headers already went out with keep-alive (a streamed answer): end the socket after the body.
        // The socket is taken now because a finished response detaches from it.
        const socket = res.socket;
        res.once('finish', () => socket?.end());
      }
    }
  };
}

export interface StartOptions {
  log: FastifyBaseLogger;
  /** Called after the routes are registered and before the server listens (test fixtures add routes). */
  beforeListen?: (app: FastifyInstance) => void | Promise<void>;
}

/** Opens the database and services, builds the app and listens on HOST:PORT. Cleans up if any step fails. */
export async function startServer(config: Config, opts: StartOptions): Promise<RunningServer> {
  const ctx = await createContext(config, { log: opts.log });
  let app: FastifyInstance | undefined;
  try {
    app = await buildApp(ctx, { logger: opts.log });
    await opts.beforeListen?.(app);
    const drain = trackInFlight(app.server);
    const address = await app.listen({ host: config.HOST, port: config.PORT });
    const where = ctx.db.kind === 'pglite' ? `embedded database in ${config.DATA_DIR}/db` : 'PostgreSQL';
    const banner = startBanner(config, {
      address,
      database: where,
      outboxDir: ctx.mailer.mode === 'outbox' ? outboxDir(config) : undefined,
      apiReference: config.API_REFERENCE_ENABLED,
    });
    opts.log.info({ ...banner.fields, database: ctx.db.kind, dataDir: config.DATA_DIR }, banner.message);
    if (config.HASURA_ENDPOINT) {
      // In the background: the engine may start after us, and its answers never block the service.
      void applyHasuraMetadata(
        {
          endpoint: config.HASURA_ENDPOINT,
          adminSecret: config.HASURA_GRAPHQL_ADMIN_SECRET,
          userRole: config.DEFAULT_USER_ROLE,
        },
        opts.log,
      );
    }
    const cliSocket =
      ctx.db.kind === 'pglite' ? await serveCliSocket({ config, db: ctx.db }, runCli, opts.log) : undefined;
    return { app, ctx, address, drain, cliSocket };
  } catch (err) {
    await app?.close().catch(() => {});
    await closeContext(ctx).catch(() => {});
    throw err;
  }
}

/**
 * A start failure an operator can fix, as one line saying what is in the way and what to do; undefined
 * for anything else (logged with its stack). Never shows DATABASE_URL's password.
 */
export function startFailure(err: unknown, config: Config): string | undefined {
  if (err instanceof DatabaseInUse || err instanceof SealedKeyMismatch) return err.message;
  const e = err as NodeJS.ErrnoException & { hostname?: string };
  const where = `${config.HOST}:${config.PORT}`;
  switch (e?.code) {
    case 'EADDRINUSE':
      return `port ${config.PORT} on ${config.HOST} is already in use by another program; stop it, or set PORT to a free port (PORT=0 picks one)`;
    case 'EACCES':
      if (e.syscall === 'listen')
        return `not allowed to listen on ${where} (ports below 1024 need privileges); set PORT to 1024 or above`;
      return undefined;
    case 'EADDRNOTAVAIL':
      return `HOST ${config.HOST} is not an address of this machine; use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      if (e.syscall === 'getaddrinfo' && e.hostname === config.HOST)
        return `HOST ${config.HOST} does not resolve to an address of this machine; use 127.0.0.1 or 0.0.0.0`;
      break;
  }
  // The pool's connection error, possibly wrapped by the query that met it.
  let cause: unknown = err;
  for (let depth = 0; cause && depth < 4; depth++) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (config.DATABASE_URL && (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ETIMEDOUT')) {
      const url = new URL(config.DATABASE_URL);
      return `cannot reach PostgreSQL at ${url.hostname}:${url.port || 5432} (${code}); start it, or correct DATABASE_URL`;
    }
    cause = (cause as Error).cause;
  }
  return undefined;
}

/** Closes the server (waiting for in-flight requests) and then the context. */
export async function stopServer(server: RunningServer): Promise<void> {
  server.drain();
  await server.cliSocket?.close();
  try {
    await server.app.close();
  } finally {
    await closeContext(server.ctx);
  }
}

export interface ShutdownOptions {
  log: FastifyBaseLogger;
  /** Longest wait for in-flight requests before giving up with exit code 1. */
  timeoutMs?: number;
  signals?: readonly NodeJS.Signals[];
  exit?: (code: number) => void;
}

/**
 * A repeat of the first signal within this long is the same stop, delivered twice: Ctrl-C reaches every
 * process of the terminal's group (npm and node), and npm forwards it to node once more; a supervisor
 * that signals the process group does the same.
 */
export const REPEAT_SIGNAL_MS = 1_000;

/**
 * Installs the signal handlers. The first signal starts a graceful stop; new requests on open
 * keep-alive connections get 503 SHUTTING_DOWN with `connection: close` (the closing check in
 * `buildApp`) while the running ones finish. The same signal again within REPEAT_SIGNAL_MS counts
 * once; another signal, or the same one later (Ctrl-C pressed twice), exits at once with code 1. The
 * timeout bounds how long a stop may take.
 */
export function installShutdown(server: RunningServer, opts: ShutdownOptions): () => Promise<void> {
  const {
    log,
    timeoutMs = 25_000,
    signals = ['SIGTERM', 'SIGINT'],
    exit = (code) => process.exit(code),
  } = opts;
  let stopping: Promise<void> | undefined;
  const stop = (signal: string): Promise<void> => {
    stopping ??= (async () => {
      log.info({ signal }, 'shutting down: finishing in-flight requests');
      const force = setTimeout(() => {
        log.error({ timeoutMs }, 'shutdown timed out; exiting with in-flight requests unfinished');
        exit(1);
      }, timeoutMs);
      force.unref();
      try {
        await stopServer(server);
        clearTimeout(force);
        log.info({ graceful: true }, 'stopped');
        exit(0);
      } catch (err) {
        clearTimeout(force);
        log.error({ err }, 'error while shutting down');
        exit(1);
      }
    })();
    return stopping;
  };
  let first: { signal: NodeJS.Signals; at: number } | undefined;
  for (const s of signals) {
    process.on(s, () => {
      const at = performance.now();
      if (!first) {
        first = { signal: s, at };
        void stop(s);
        return;
      }
      if (s === first.signal && at - first.at < REPEAT_SIGNAL_MS) {
        log.info({ signal: s }, 'the same signal again (delivered to the process group): still stopping');
        return;
      }
      log.warn({ signal: s }, 'second signal: exiting without waiting for in-flight requests');
      exit(1);
    });
  }
  return () => stop('manual');
}
