/** Baseline server: a Fastify hello-world with the service's logger level, on the port in argv[2]. */
import Fastify from 'fastify';

const app = Fastify({ logger: { level: 'warn' } });
const body = {
  key: 'user/00000000-0000-4000-8000-000000000000/hello.txt',
  AcceptRanges: 'bytes',
  LastModified: new Date(0).toISOString(),
  ContentLength: 11,
  ETag: '"5eb63bbbe01eeed093cb22bb8f5acdc3"',
  ContentType: 'text/plain',
  Metadata: { token: '00000000-0000-4000-8000-000000000000' },
};
app.get('/hello', async () => body);
await app.listen({ host: '127.0.0.1', port: Number(process.argv[2]) });
