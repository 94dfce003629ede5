/**
 * A logger built as the service builds its own (src/http/logging.ts: redaction and serializers included)
 * whose JSON lines the test can read (`lines`, `text`), for "logged once" and "never logged" checks.
 */
import { Writable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import type pino from 'pino';
import { createLogger } from '../../src/http/logging.ts';

export interface CapturedLog {
  log: FastifyBaseLogger;
  lines: Record<string, unknown>[];
  /** Lines whose `msg` matches. */
  matching(msg: RegExp): Record<string, unknown>[];
  /** Everything written, exactly as written. */
  text(): string;
}

export function captureLog(level: pino.Level = 'info'): CapturedLog {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      raw.push(String(chunk));
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return {
    log: createLogger(level, sink) as unknown as FastifyBaseLogger,
    lines,
    matching: (msg) => lines.filter((l) => msg.test(String(l['msg'] ?? ''))),
    text: () => raw.join(''),
  };
}
