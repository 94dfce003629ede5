/**
 * The start log line: where to open the service, and (outside production) its console, API reference
 * and development outbox, so that a newcomer needs nothing but the log to find them.
 */
import type { Config } from './config.ts';

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

function portOf(url: URL): string {
  return url.port || (url.protocol === 'https:' ? '443' : '80');
}

/**
 * The base URL to open this server at. When SERVER_URL names this very server (the default,
 * `http://localhost:<PORT>`), it is SERVER_URL: the links in emails are built from it, and a page opened
 * at 127.0.0.1 would not share its cookies (its session) with a link that opens localhost. Otherwise (a
 * proxy's URL, another port) the address the server is bound to.
 */
export function openUrl(config: Pick<Config, 'SERVER_URL'>, address: string): string {
  const bound = new URL(address);
  let server: URL;
  try {
    server = new URL(config.SERVER_URL);
  } catch {
    return bound.origin;
  }
  const boundLocal =
    LOOPBACK.has(bound.hostname) || bound.hostname === '0.0.0.0' || bound.hostname === '[::]';
  if (boundLocal && LOOPBACK.has(server.hostname) && portOf(server) === portOf(bound)) return server.origin;
  return bound.origin;
}

export interface Banner {
  message: string;
  fields: Record<string, string>;
}

export function startBanner(
  config: Pick<Config, 'SERVER_URL' | 'CONSOLE_ENABLED' | 'DATA_DIR'>,
  at: { address: string; database: string; outboxDir?: string | undefined; apiReference: boolean },
): Banner {
  const url = openUrl(config, at.address);
  const fields: Record<string, string> = { address: at.address, url };
  const parts = [`Gatehouse listening on ${url} (${at.database})`];
  if (config.CONSOLE_ENABLED) {
    fields['console'] = `${url}/console/`;
    parts.push(`console: ${fields['console']}`);
  }
  if (at.apiReference) {
    fields['apiReference'] = `${url}/docs`;
    parts.push(`API reference: ${fields['apiReference']}`);
  }
  if (at.outboxDir) {
    fields['outbox'] = at.outboxDir;
    parts.push(`emails: ${at.outboxDir}`);
  }
  return { message: parts.join('; '), fields };
}
