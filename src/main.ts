/**
 * Process entry: read the configuration (exit 1 with one message listing every problem), start the
 * server, and stop it gracefully on SIGTERM/SIGINT (see server.ts).
 */
import pino from 'pino';
import { REDACT } from './app.ts';
import { type Config, ConfigError, loadConfig, readEnv } from './config.ts';
import { installShutdown, startServer } from './server.ts';

let config: Config;
try {
  config = loadConfig(readEnv());
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}

const log = pino({ level: config.LOG_LEVEL, redact: REDACT });
try {
  const server = await startServer(config, { log });
  installShutdown(server, { log });
} catch (err) {
  log.fatal({ err }, `cannot start: ${(err as Error).message}`);
  process.exit(1);
}
