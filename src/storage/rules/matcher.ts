/**
 * Path patterns of the rules file, as HBP wrote them (Express 4 style): `:name` is one non-empty
 * segment, `*` is anything (slashes included, possibly empty; its value is the variable `0`, `1`, …).
 * Unlike HBP, matching is case-sensitive (object keys are) and a trailing slash is significant: a
 * pattern ending in `/` matches folders (listing and zip), any other matches files.
 */
export interface PathPattern {
  readonly source: string;
  readonly names: readonly string[];
  match(path: string): Record<string, string> | undefined;
}

const PARAM = /^:([A-Za-z_$][\w$]*)/;

export function compilePattern(source: string): PathPattern {
  if (!source.startsWith('/')) throw new Error('a path pattern must start with "/"');
  const names: string[] = [];
  let re = '^';
  let stars = 0;
  for (let i = 0; i < source.length; ) {
    const rest = source.slice(i);
    const param = PARAM.exec(rest);
    if (param) {
      const name = param[1] as string;
      if (names.includes(name)) throw new Error(`the variable "${name}" appears twice`);
      names.push(name);
      re += '([^/]+?)';
      i += param[0].length;
    } else if (rest[0] === '*') {
      names.push(String(stars++));
      re += '(.*)';
      i += 1;
    } else if (rest[0] === ':') {
      throw new Error('":" must be followed by a variable name');
    } else {
      re += (rest[0] as string).replace(/[.+?^${}()|[\]\\/]/g, '\\$&');
      i += 1;
    }
  }
  const regex = new RegExp(`${re}$`, 's');
  return {
    source,
    names,
    match(path) {
      const m = regex.exec(path);
      if (!m) return undefined;
      const vars: Record<string, string> = Object.create(null);
      names.forEach((n, idx) => {
        vars[n] = m[idx + 1] ?? '';
      });
      return vars;
    },
  };
}
