/**
 * Names of access-token claims, in a module of their own with no imports: config.ts checks custom field
 * names against them at start, and jwt.ts (which needs the config) writes them.
 */

/** lodash.kebabCase for column names: `company_id` and `companyId` both give `company-id`. */
export function kebabCase(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .join('-')
    .toLowerCase();
}

/**
 * Claim names (un-prefixed) that only the service sets: a custom field kebab-cased to one of them is
 * refused at start (config.ts). `role` is Hasura's session variable for the role a request acts as; it
 * must come from the request's `x-hasura-role` header, checked against the allowed roles, never from a
 * column a user may write.
 */
export const RESERVED_CLAIMS: readonly string[] = ['user-id', 'allowed-roles', 'default-role', 'role'];
