/** A pino logger whose JSON lines the test can read (`lines`), for "logged once" checks. */
import { Writable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';

export interface CapturedLog {
  log: FastifyBaseLogger;
  lines: Record<string, unknown>[];
  /** Lines whose `msg` matches. */
  matching(msg: RegExp): Record<string, unknown>[];
}

export function captureLog(level: pino.Level = 'info'): CapturedLog {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return {
    log: pino({ level }, sink) as unknown as FastifyBaseLogger,
    lines,
    matching: (msg) => lines.filter((l) => msg.test(String(l['msg'] ?? ''))),
  };
}
