/** Child process: reads a LoadSpec on stdin, runs autocannon, prints a LoadResult as JSON. */
import autocannon from 'autocannon';
import type { LoadResult, LoadSpec } from './load.ts';

const chunks: Buffer[] = [];
for await (const c of process.stdin) chunks.push(c as Buffer);
const spec = JSON.parse(Buffer.concat(chunks).toString('utf8')) as LoadSpec;

type Ctx = { token?: string };
let nextToken = 0;

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
  const tokens = spec.refreshTokens;
  const base = new URL(spec.url);
  opts.requests = [
    {
      setupRequest: (req: autocannon.Request, context: Ctx) => {
        context.token ??= tokens[nextToken++ % tokens.length];
        return {
          ...req,
          method: 'GET',
          path: `${base.pathname}?refresh_token=${encodeURIComponent(context.token ?? '')}`,
        };
      },
      onResponse: (status: number, body: string, context: Ctx) => {
        if (status === 200) context.token = (JSON.parse(body) as { refresh_token: string }).refresh_token;
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
};
process.stdout.write(JSON.stringify(result));
