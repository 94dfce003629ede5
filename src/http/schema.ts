/**
 * Route schemas that depend on the settings. Most routes declare one static TypeBox schema, which the
 * type provider turns into the handler's types. A few accept fields only when a feature is on (login,
 * register): their schema is built at start from the configuration, and the handler is typed with the
 * widest body any configuration accepts, every such field optional, so it checks what the settings left
 * optional. The validator and /openapi.json see the built schema.
 */
import type { TSchema } from '@sinclair/typebox';

/** A built schema typed as `T` for the type provider (TypeBox's Unsafe, as the provider reads it). */
export type ConfiguredSchema<T> = TSchema & { readonly '~unsafe': T; readonly static: T };

/** `schema`, typed as `T`: the widest value any configuration's version of the schema accepts. */
export function configuredSchema<T>(schema: TSchema): ConfiguredSchema<T>;
export function configuredSchema(schema: TSchema): TSchema {
  return schema;
}
