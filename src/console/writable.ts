/**
 * Where a signed-in person may upload, as the console shows it: folders derived from the storage rules
 * the service runs, each checked by asking the rules themselves. A rules file can say anything, so no
 * folder is assumed: each path entry that answers a create becomes a candidate folder (its variables
 * filled with the person's id, the usual way rules name an owner), and only candidates the rules then
 * allow a create in are listed.
 */
import type { PermissionVariables } from '../auth/jwt.ts';
import { NOT_YET_KNOWN } from '../storage/rules/expression.ts';
import type { StorageRules } from '../storage/rules/rules.ts';

export interface WritableFolder {
  /** The folder, without a leading slash: `user/<id>/`. */
  folder: string;
  /** True when sub-folders may be written too (the entry ends in `*`); false: files directly in it. */
  nested: boolean;
}

/** A file name no rule is likely to single out, used to ask the rules about a folder. */
const PROBE_NAME = 'console-upload-check.bin';

/**
 * The candidate folder of a path pattern for user `id`: the pattern up to its last variable or `*`
 * (`/user/:userId/:fileId` → `/user/<id>/`, `/public*` → `/public/`), or undefined for a pattern that
 * names one file only.
 */
function candidate(pattern: string, id: string): WritableFolder | undefined {
  const lastSlash = pattern.lastIndexOf('/');
  const star = pattern.indexOf('*');
  const param = pattern.slice(lastSlash).search(/:[A-Za-z_$]/);
  const cuts = [star, param < 0 ? -1 : lastSlash + param].filter((i) => i >= 0);
  if (cuts.length === 0) return undefined;
  const cut = Math.min(...cuts);
  let folder = pattern.slice(0, cut).replace(/:[A-Za-z_$][\w$]*/g, id);
  if (!folder.endsWith('/')) folder += '/';
  return { folder, nested: star >= 0 && star === cut };
}

/** The folders `auth` may create files in under `rules`, in the rules' order, without duplicates. */
export function writableFolders(rules: StorageRules, auth: PermissionVariables): WritableFolder[] {
  const id = auth['user-id'];
  const out: WritableFolder[] = [];
  for (const pattern of rules.patterns('create')) {
    const c = candidate(pattern, id);
    if (!c || out.some((f) => f.folder === c.folder.slice(1))) continue;
    const decision = rules.decide('create', {
      path: `${c.folder}${PROBE_NAME}`,
      method: 'POST',
      query: {},
      auth,
      // The upload's size is not known when the page asks: a rule that reads it says "later" (allowed,
      // subject to the file).
      resource: { name: PROBE_NAME, size: NOT_YET_KNOWN, mimetype: 'application/octet-stream' },
    });
    if (decision.allowed !== false) out.push({ folder: c.folder.slice(1), nested: c.nested });
  }
  return out;
}
