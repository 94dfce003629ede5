/**
 * An Explanation (rules.ts) as text: what `gatehouse rules explain` prints and what the service logs at
 * debug level for a request the rules refuse. File tokens are secrets (whoever has one reads the file),
 * so a value equal to one shows as a label instead — "[the file's token]", or "[another token]" for a
 * token sent that is not the file's — and any other property named `token` as "[token]".
 */
import { LazyRecord, NOT_YET_KNOWN, type Value } from './expression.ts';
import type { Decision, Explanation } from './rules.ts';

const MAX_VALUE = 300;

/** Renders a rule value as JavaScript-like text, secrets hidden. */
export function renderValue(v: Value, secrets: Secrets = new Map()): string {
  const text = render(v, secrets, 0);
  return text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE)}…` : text;
}

/** Strings never to print, each with the label shown instead. */
export type Secrets = ReadonlyMap<string, string>;

function render(v: Value, secrets: Secrets, depth: number): string {
  if (v === NOT_YET_KNOWN) return '(not known yet)';
  if (v === undefined) return 'undefined';
  if (typeof v === 'string') return secrets.get(v) ?? JSON.stringify(v);
  if (v === null || typeof v !== 'object') return String(v);
  if (depth > 8) return '…';
  if (v instanceof LazyRecord) return render(LazyRecord.snapshot(v), secrets, depth);
  if (Array.isArray(v))
    return `[${(v as readonly Value[]).map((x) => render(x, secrets, depth + 1)).join(', ')}]`;
  const entries = Object.entries(v as Record<string, Value>).map(([k, x]) => {
    const key = /^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k);
    return `${key}: ${k === 'token' && typeof x === 'string' && !secrets.has(x) ? '[token]' : render(x, secrets, depth + 1)}`;
  });
  return `{${entries.join(', ')}}`;
}

/** The decision in one line. */
export function describeDecision(d: Decision): string {
  if (d.allowed === true) return 'ALLOWED';
  if (d.allowed === 'later') return 'UNDECIDED until the upload has arrived (a rule reads its size)';
  return `DENIED: ${d.reason}`;
}

/**
 * The explanation, one line per entry, rule and sub-expression (indented by depth). `secrets` are the
 * strings never to print (file tokens).
 */
export function formatExplanation(e: Explanation, secrets: Secrets = new Map()): string[] {
  const lines: string[] = [];
  const tries: Record<string, string> = {
    create: 'create, then write',
    update: 'update, then write',
    get: 'get, then read',
    list: 'list, then read',
    delete: 'delete, then write',
  };
  lines.push(`operation: ${e.operation} on ${e.path} (rules tried: ${tries[e.operation]})`);
  if (e.entries.length === 0) lines.push(`no path entry has a rule for ${e.operation}`);
  for (const entry of e.entries) {
    if (!entry.vars) {
      lines.push(`path "${entry.pattern}": does not match`);
      continue;
    }
    const vars = Object.entries(entry.vars).map(([k, v]) => `${k} = ${renderValue(v, secrets)}`);
    lines.push(`path "${entry.pattern}": matches${vars.length ? ` (${vars.join(', ')})` : ''}`);
    for (const rule of entry.rules) {
      const outcome =
        rule.error !== undefined ? `error: ${rule.error}` : `${renderValue(rule.value, secrets)}`;
      lines.push(`  ${rule.key}: ${rule.expression}  →  ${outcome}`);
      for (const step of rule.steps) {
        // The whole request, again under each of its properties read, says nothing they do not.
        if (step.expression === 'request' && step.error === undefined) continue;
        const value = step.error !== undefined ? `error: ${step.error}` : renderValue(step.value, secrets);
        lines.push(`  ${'  '.repeat(step.depth + 1)}${step.expression} = ${value}`);
      }
    }
  }
  if (e.decision) lines.push(`decision: ${describeDecision(e.decision)}`);
  return lines;
}

/** The file tokens a rule input carries: the one the request sent and the file's own. */
export function fileTokens(query: Record<string, unknown>, resource: unknown): Secrets {
  const out = new Map<string, string>();
  const sent = query['token'];
  if (typeof sent === 'string' && sent !== '') out.set(sent, '[another token]');
  const own = (resource as { Metadata?: { token?: unknown } } | undefined)?.Metadata?.token;
  if (typeof own === 'string' && own !== '') out.set(own, "[the file's token]");
  return out;
}
