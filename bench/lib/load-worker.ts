/** Child process: reads a LoadSpec on stdin, runs autocannon, prints a LoadResult as JSON. */
import autocannon from 'autocannon';
import type { LoadResult, LoadSpec } from './load.ts';

const chunks: Buffer[] = [];
for await (const c of process.stdin) chunks.push(c as Buffer);
const spec = JSON.parse(Buffer.concat(chunks).toString('utf8')) as LoadSpec;

/** The first answer that was not a 200 in a refresh chain, to say what went wrong. */
let firstFailure: string | undefined;

const opts: autocannon.Options = {
  url: spec.url,
  connections: spec.connections,
  duration: spec.durationS,
  amount: spec.amount,
  method: spec.method ?? 'GET',
  headers: spec.headers,
  body: spec.body,
  overallRate: spec.rate,
};
if (spec.refreshTokens) {
  // One rotation chain per connection. autocannon clears a request's context before every request when
  // the sequence has one entry, so the chains' current tokens live here instead: a connection takes a
  // token when it sends and puts the successor back when the answer arrives. With as many tokens as
  // connections and one request in flight per connection, a token is always free, and every request
  // presents a token that has never been used, so each one is a real rotation (never the reuse grace).
  const free = [...spec.refreshTokens];
  const base = new URL(spec.url);
  opts.requests = [
    {
      setupRequest: (req: autocannon.Request) => ({
        ...req,
        method: 'GET',
        path: `${base.pathname}?refresh_token=${encodeURIComponent(free.shift() ?? '')}`,
      }),
      onResponse: (status: number, body: string) => {
        if (status === 200) free.push((JSON.parse(body) as { refresh_token: string }).refresh_token);
        else firstFailure ??= `${status} ${body.slice(0, 300)}`;
      },
    } as autocannon.Request,
  ];
}

if (spec.bodies) {
  const bodies = [...spec.bodies];
  opts.requests = [
    {
      setupRequest: (req: autocannon.Request) => ({ ...req, body: bodies.shift() ?? '' }),
      onResponse: (status: number, body: string) => {
        if (status !== 200) firstFailure ??= `${status} ${body.slice(0, 300)}`;
      },
    } as autocannon.Request,
  ];
}

const r = await autocannon(opts);
const result: LoadResult = {
  requestsPerSec: r.requests.average,
  throughputMBps: r.throughput.average / 1e6,
  latencyP50: r.latency.p50,
  latencyP99: r.latency.p99,
  latencyMax: r.latency.max,
  requests: r.requests.total,
  errors: r.errors + r.timeouts,
  non2xx: r.non2xx,
  durationS: r.duration,
  statusCodes: Object.fromEntries(
    Object.entries(r.statusCodeStats ?? {}).map(([code, s]) => [code, (s as { count: number }).count]),
  ),
  ...(firstFailure ? { firstFailure } : {}),
};
process.stdout.write(JSON.stringify(result));
