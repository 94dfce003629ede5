/**
 * Routes a setting switches off are not registered, so they answer 404 like any unknown path; yet the
 * OpenAPI document lists them, marked with the setting that turns them on (`x-gatehouse-enabled: false`,
 * `x-gatehouse-enabled-by`), so that a reader learns that the route exists and how to get it.
 *
 * A route group calls `registerWhen` where it would write `if (setting) register(...)`. When the gate is
 * closed, the registration is kept instead of run. Once the app's routes are in place, `switchedOffPaths`
 * runs the kept registrations in a Fastify instance of their own that never listens, with
 * @fastify/swagger, and returns the paths it documents: the same route files and the same schemas as
 * when the routes are on, with nothing written twice.
 */
import swagger, { type SwaggerOptions } from '@fastify/swagger';
import Fastify, {
  type FastifyInstance,
  type FastifyPluginAsync,
  type FastifySchema,
  type RouteOptions,
} from 'fastify';
import { isSignedInContext, signedInRoutes } from './identity.ts';

/** Whether a group of routes is on, and otherwise the setting (with its value) that turns it on. */
export interface Gate {
  on: boolean;
  /** `LOST_PASSWORD_ENABLED=true`; several joined with ` and `. */
  enabledBy: string;
}

/** The gate of routes that need each of `wanted` (setting names and the value each needs). */
export function gate(config: object, wanted: Record<string, boolean>, extra: string[] = []): Gate {
  const values = config as Record<string, unknown>;
  const missing = Object.entries(wanted)
    .filter(([name, value]) => values[name] !== value)
    .map(([name, value]) => `${name}=${value}`);
  const all = [...missing, ...extra];
  return { on: all.length === 0, enabledBy: all.join(' and ') };
}

type Registration = (scope: FastifyInstance) => PromiseLike<unknown>;

interface Kept {
  prefix: string;
  enabledBy: string;
  signedIn: boolean;
  register: Registration;
}

/** Registrations kept per app (the root instance), found from any of its contexts. */
const keptByApp = new WeakMap<object, Kept[]>();
/** The instances of `switchedOffPaths`, where a closed gate inside a kept registration still registers. */
const documenting = new WeakSet<object>();

/** Marks a route's schema as switched off until `enabledBy` (added to what an outer gate needs). */
function markOff(route: RouteOptions, enabledBy: string): void {
  const schema = (route.schema ?? {}) as { description?: string; 'x-gatehouse-enabled-by'?: string };
  const outer = schema['x-gatehouse-enabled-by'];
  const all = outer ? `${outer} and ${enabledBy}` : enabledBy;
  const note = `Switched off here: set ${all}.`;
  // An outer gate's note is replaced by one naming both.
  const outerNote = `Switched off here: set ${outer}.`;
  let description = schema.description;
  if (outer && description?.startsWith(outerNote)) description = description.slice(outerNote.length).trim();
  route.schema = {
    ...schema,
    description: description ? `${note}\n\n${description}` : note,
    'x-gatehouse-enabled': false,
    'x-gatehouse-enabled-by': all,
  } as FastifySchema;
}

/** Starts keeping the switched-off registrations of `app` (the root instance). */
export function keepSwitchedOff(app: FastifyInstance): void {
  keptByApp.set(app, []);
}

/** True in the instance that only documents switched-off routes: no service is there to use. */
export function documentsOnly(scope: FastifyInstance): boolean {
  for (let s: object | null = scope; s !== null; s = Object.getPrototypeOf(s))
    if (documenting.has(s)) return true;
  return false;
}

/**
 * Runs `register` in `scope` when the gate is open; otherwise keeps it for the OpenAPI document. Without
 * `keepSwitchedOff` on the app (a group registered on its own), a closed gate registers nothing.
 */
export async function registerWhen(scope: FastifyInstance, g: Gate, register: Registration): Promise<void> {
  if (g.on) {
    await register(scope);
    return;
  }
  // Fastify makes each child context with `Object.create(parent)`: the chain leads back to the root.
  let kept: Kept[] | undefined;
  for (let s: object | null = scope; s !== null && !kept; s = Object.getPrototypeOf(s)) {
    if (documenting.has(s)) {
      const marked: FastifyPluginAsync = async (inner) => {
        inner.addHook('onRoute', (route) => markOff(route, g.enabledBy));
        await register(inner);
      };
      await scope.register(marked);
      return;
    }
    kept = keptByApp.get(s);
  }
  kept?.push({ prefix: scope.prefix, enabledBy: g.enabledBy, signedIn: isSignedInContext(scope), register });
}

/**
 * A service a switched-off route would use, for the instance that only documents it: it never answers a
 * request, so any use is a bug and throws.
 */
export function notServed<T extends object>(what: string): T {
  return new Proxy({} as T, {
    get(_target, key) {
      throw new Error(`${what} is not available to switched-off routes (reading ${String(key)})`);
    },
  });
}

export interface OpenApiPaths {
  paths: Record<string, Record<string, unknown>>;
  components?: { schemas?: Record<string, unknown> };
}

/**
 * The OpenAPI paths of the routes kept for `app`, each operation marked with the setting that turns it
 * on. `openapi` is the app's own swagger options, so that the security schemes resolve the same way.
 */
export async function switchedOffPaths(app: FastifyInstance, openapi: SwaggerOptions): Promise<OpenApiPaths> {
  const kept = keptByApp.get(app) ?? [];
  if (kept.length === 0) return { paths: {} };
  const doc = Fastify({ logger: false });
  documenting.add(doc);
  // It answers no request: compiling validators and serializers for its routes would only cost time.
  doc.setValidatorCompiler(() => () => true);
  doc.setSerializerCompiler(() => (data) => JSON.stringify(data));
  await doc.register(swagger, openapi);
  for (const k of kept) {
    const marked: FastifyPluginAsync = async (scope) => {
      scope.addHook('onRoute', (route) => markOff(route, k.enabledBy));
      if (k.signedIn) await scope.register(signedInRoutes(async (s) => void (await k.register(s))));
      else await k.register(scope);
    };
    await doc.register(marked, { prefix: k.prefix });
  }
  await doc.ready();
  const out = doc.swagger() as unknown as OpenApiPaths;
  await doc.close();
  return out;
}

/** Adds `off`'s operations to `doc` (never over one that is on). */
export function mergePaths<D extends OpenApiPaths>(doc: D, off: OpenApiPaths): D {
  for (const [path, ops] of Object.entries(off.paths)) {
    const into = doc.paths[path] ?? {};
    for (const [method, op] of Object.entries(ops)) if (!(method in into)) into[method] = op;
    doc.paths[path] = into;
  }
  const schemas = off.components?.schemas ?? {};
  if (Object.keys(schemas).length > 0) {
    doc.components = doc.components ?? {};
    doc.components.schemas = { ...schemas, ...doc.components.schemas };
  }
  return doc;
}
