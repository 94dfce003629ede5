/**
 * Process entry: read the configuration (exit 1 listing every problem), open the database and the other
 * services, build the app and listen. SIGTERM/SIGINT stop accepting connections, let in-flight requests
 * finish, close the pools and exit 0.
 */
import pino from 'pino';
import { buildApp, REDACT } from './app.ts';
import { ConfigError, loadConfig, readEnv } from './config.ts';
import { closeContext, createContext } from './context.ts';

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(readEnv());
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const log = pino({ level: config.LOG_LEVEL, redact: REDACT });
  let ctx: Awaited<ReturnType<typeof createContext>>;
  try {
    ctx = await createContext(config, { log });
  } catch (err) {
    log.fatal({ err }, `cannot start: ${(err as Error).message}`);
    process.exit(1);
  }
  const app = await buildApp(ctx, { logger: log });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    const force = setTimeout(() => {
      log.error('shutdown took longer than 30 s; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    try {
      await app.close();
      await closeContext(ctx);
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error while shutting down');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  const address = await app.listen({ host: config.HOST, port: config.PORT });
  log.info(
    { address, database: ctx.db.kind, dataDir: config.DATA_DIR },
    `Gatehouse listening on ${address} (${ctx.db.kind === 'pglite' ? `embedded database in ${config.DATA_DIR}/db` : 'PostgreSQL'})`,
  );
}

await main();
