/**
 * GET /storage/usage: what the signed-in caller stores against their quota: the sum of the sizes and the
 * count of the files they own (uploads with the admin secret count for no one), and their quota (null
 * when unlimited).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { storageUsage } from '../quotas.ts';
import type { StorageRouteDeps } from './common.ts';

const schema = {
  summary: "The signed-in user's storage usage and quota",
  tags: ['storage'],
  security: [{ bearer: [] }],
  response: {
    200: Type.Object(
      {
        used_bytes: Type.Integer({ minimum: 0, description: 'Sum of the sizes of the files you own.' }),
        quota_bytes: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
          description: 'Your quota in bytes; null when unlimited.',
        }),
        files: Type.Integer({ minimum: 0, description: 'How many files you own.' }),
      },
      { additionalProperties: false },
    ),
    ...errorResponses(401, 403, 429, 503),
  },
};

export const usageRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (app, { deps }) => {
  app.get('/usage', { schema }, async (request) => storageUsage(deps, request.user['user-id']));
};
