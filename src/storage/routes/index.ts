/**
 * The /storage route group (object data under /o, metadata under /m).
 */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import type { ReadinessCheck } from '../../http/health.ts';

export async function storageRoutes(
  _app: FastifyInstance,
  _opts: { ctx: AppContext; readiness: ReadinessCheck[] },
): Promise<void> {
  // Routes are added by the storage work.
}
