/**
 * The /storage route group: object data under /o, metadata under /m. Each route lives in its own file.
 */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import type { ReadinessCheck } from '../../http/health.ts';
import { depsOf, keyOf } from './common.ts';
import { deleteFileRoute } from './delete-file.ts';
import { deleteMetadataRoute } from './delete-metadata.ts';
import { getFileRoute } from './get-file.ts';
import { getMetadataRoute } from './get-metadata.ts';
import { updateMetadataRoute } from './update-metadata.ts';
import { uploadRoute } from './upload.ts';

export async function storageRoutes(
  app: FastifyInstance,
  opts: { ctx: AppContext; readiness: ReadinessCheck[] },
): Promise<void> {
  const { objects } = depsOf(opts.ctx);
  opts.readiness.push({ name: 'storage', check: () => objects.ping() });
  // A bad key is refused before anything else looks at the request, its body included (a DELETE with a
  // text body would otherwise get 415 instead of the 400 that names the real problem).
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.url?.endsWith('*')) keyOf(request);
  });
  await app.register(uploadRoute, { ctx: opts.ctx });
  await app.register(getFileRoute, { ctx: opts.ctx });
  await app.register(getMetadataRoute, { ctx: opts.ctx });
  await app.register(deleteFileRoute, { ctx: opts.ctx });
  await app.register(deleteMetadataRoute, { ctx: opts.ctx });
  await app.register(updateMetadataRoute, { ctx: opts.ctx });
}
