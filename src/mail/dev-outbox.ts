/**
 * The development outbox as the console reads it. The outbox mailer (mailer.ts) writes each message as
 * an `.eml` file in DATA_DIR/outbox and, beside it, a `.json` entry with what a person reads (the
 * recipient, subject, text and action link) and the same as plain text (`.txt`). Only the outbox mailer writes here, and only outside
 * production (a production start refuses to run without SMTP_HOST), so nothing here exists there.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface OutboxEntry {
  /** The file name without extension: stable, sortable by time. */
  id: string;
  date: string;
  to: string;
  subject: string;
  template: string;
  text: string;
  link?: string;
}

/**
 * Writes the entries of the message saved as `emlFile`: the `.json` the console reads and a `.txt` for a
 * person with a terminal. The `.eml` is quoted-printable (a long link is cut with `=` line breaks), so
 * `grep` finds a link only in the `.txt` (or the `.json`'s `link`).
 */
export function writeOutboxEntry(emlFile: string, entry: Omit<OutboxEntry, 'id'>): void {
  const base = emlFile.replace(/\.eml$/, '');
  writeFileSync(`${base}.json`, JSON.stringify(entry), { mode: 0o600 });
  const head = [
    `To: ${entry.to}`,
    `Subject: ${entry.subject}`,
    ...(entry.link ? [`Link: ${entry.link}`] : []),
  ];
  writeFileSync(`${base}.txt`, `${head.join('\n')}\n\n${entry.text}\n`, { mode: 0o600 });
}

function isEntry(v: unknown): v is Omit<OutboxEntry, 'id'> {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return (
    ['date', 'to', 'subject', 'template', 'text'].every((k) => typeof o[k] === 'string') &&
    (o.link === undefined || typeof o.link === 'string')
  );
}

/**
 * The newest `limit` messages of the outbox in `dir`, newest first. A missing folder is an empty outbox;
 * a file that is not an entry (half written, edited by hand) is left out.
 */
export function readOutbox(dir: string, limit = 50): OutboxEntry[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  // Names start with an ISO time stamp, so they sort by time.
  names.sort().reverse();
  const out: OutboxEntry[] = [];
  for (const name of names) {
    if (out.length >= limit) break;
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path.join(dir, name), 'utf8'));
    } catch {
      continue;
    }
    if (!isEntry(parsed)) continue;
    const { date, to, subject, template, text, link } = parsed;
    out.push({
      id: name.slice(0, -'.json'.length),
      date,
      to,
      subject,
      template,
      text,
      ...(link ? { link } : {}),
    });
  }
  return out;
}
