/**
 * The /storage route group: object data under /o, metadata under /m, share links under /shares (their
 * owner, signed in) and /s (anyone holding one), the caller's usage at /usage. Each route lives in its
 * own file.
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../http/identity.ts';
import { keyOf, type StorageRouteDeps } from './common.ts';
import { deleteFileRoute } from './delete-file.ts';
import { deleteMetadataRoute } from './delete-metadata.ts';
import { getFileRoute } from './get-file.ts';
import { getMetadataRoute } from './get-metadata.ts';
import { getSharedFileRoute } from './get-shared-file.ts';
import { shareRoutes } from './shares.ts';
import { tusRoutes } from './tus.ts';
import { updateMetadataRoute } from './update-metadata.ts';
import { uploadRoute } from './upload.ts';
import { usageRoute } from './usage.ts';

export const storageRoutes: FastifyPluginAsync<{ deps: StorageRouteDeps }> = async (app, { deps }) => {
  // A bad key is refused before anything else looks at the request, its body included (a DELETE with a
  // text body would otherwise get 415 instead of the 400 that names the real problem).
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.url?.endsWith('*')) keyOf(request);
  });
  await app.register(uploadRoute, { deps });
  await app.register(getFileRoute, { deps });
  await app.register(getMetadataRoute, { deps });
  await app.register(deleteFileRoute, { deps });
  await app.register(deleteMetadataRoute, { deps });
  await app.register(updateMetadataRoute, { deps });
  await app.register(getSharedFileRoute, { deps });
  await app.register(
    signedInRoutes(async (signedIn) => {
      await signedIn.register(shareRoutes, { deps });
      await signedIn.register(usageRoute, { deps });
    }),
  );
  const { tus } = deps;
  if (tus) await app.register(tusRoutes, { deps: { ...deps, tus } });
};
