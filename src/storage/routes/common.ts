/**
 * What the storage routes share: the key from the URL, the caller as the rules see it, and the
 * response schemas.
 */
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import { AppError } from '../../errors.ts';
import { ADMIN_SECRET_SUBJECT } from '../../http/guesses.ts';
import type { ImageService } from '../images/service.ts';
import { type ParsedKey, parseKey } from '../keys.ts';
import { type Caller, isAdmin, type StorageDeps } from '../service.ts';
import type { TusUploads } from '../tus/service.ts';

export const FileMetadataSchema = Type.Object(
  {
    key: Type.String(),
    AcceptRanges: Type.Literal('bytes'),
    LastModified: Type.String({ format: 'date-time' }),
    ContentLength: Type.Integer({ minimum: 0 }),
    ETag: Type.String(),
    ContentType: Type.String(),
    Metadata: Type.Object({ token: Type.String() }, { additionalProperties: false }),
  },
  { additionalProperties: false, description: 'Stored file metadata' },
);

export const KeyParams = Type.Object(
  { '*': Type.String({ description: 'The file path; a trailing "/" names a folder.' }) },
  { additionalProperties: false },
);

/** `?token=` is what HBP's default `validToken()` rule reads. */
export const TokenQuery = Type.Object(
  { token: Type.Optional(Type.String({ description: 'The file token, for rules that use it.' })) },
  { additionalProperties: false },
);

export const security: { [scheme: string]: string[] }[] = [{ bearer: [] }, { adminSecret: [] }, {}];

/** What the storage routes use: the service's dependencies and the image transforms. */
export interface StorageRouteDeps extends StorageDeps {
  readonly images: ImageService;
  /** Resumable uploads (/storage/uploads); absent where storage is not served. */
  readonly tus?: TusUploads;
}

/** Keys already parsed, per request: the group's onRequest hook parses first, the handler again. */
const parsedKeys = new WeakMap<FastifyRequest, ParsedKey>();

/**
 * The key from the raw URL (not the router's decoding), so that decoding happens exactly once and is
 * checked (src/storage/keys.ts).
 */
export function keyOf(request: FastifyRequest): ParsedKey {
  const known = parsedKeys.get(request);
  if (known) return known;
  const route = request.routeOptions.url ?? '';
  const prefix = route.slice(0, route.length - 1);
  const q = request.url.indexOf('?');
  const raw = q === -1 ? request.url : request.url.slice(0, q);
  if (!route.endsWith('*') || !raw.startsWith(prefix)) throw new AppError('NOT_FOUND');
  // Frozen: the hook and the handler share it.
  const key = Object.freeze(parseKey(raw.slice(prefix.length)));
  parsedKeys.set(request, key);
  return key;
}

/**
 * The caller as the rules see it, with "admin" decided here, once. An `x-admin-secret` (when a secret is
 * configured) is a guess at it: refused with 429 over the limits before it is compared, and counted when
 * wrong (http/guesses.ts).
 */
export async function callerOf(
  request: FastifyRequest,
  query: Record<string, unknown>,
  config: Config,
): Promise<Caller> {
  const secret = request.headers['x-admin-secret'];
  const admin =
    typeof secret === 'string' && secret !== '' && config.HASURA_GRAPHQL_ADMIN_SECRET !== ''
      ? await request.server.guesses.guard(ADMIN_SECRET_SUBJECT, request.ip, () => isAdmin(config, secret))
      : false;
  // A copy for the rules. An empty `?token=` must never equal the empty token of an object stored without
  // one (S3 objects put by other tools): rules compare `request.query.token === resource.Metadata.token`.
  const { token, ...rest } = query;
  return {
    method: request.method,
    query: token === '' ? rest : { ...query },
    auth: await request.identity(),
    admin,
    adminSecretSent: typeof secret === 'string' && secret !== '',
    log: request.log,
  };
}
