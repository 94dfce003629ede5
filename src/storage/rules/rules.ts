/**
 * Storage access rules in HBP's `rules.yaml` format, loaded and checked once at start: a mistake stops
 * the service with the file, the line and the rule named. Decisions follow contract §8.6 (which rule keys
 * an operation tries, and which path entry answers), with two fixes: any error in a rule denies, and a
 * request no entry answers is denied rather than routed to a 404.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isMap, isScalar, LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import {
  type CompiledExpression,
  compileExpression,
  evaluate,
  lazyValue,
  RuleError,
  type RuleFunction,
  RuleNeedsValue,
  Trace,
  type TraceStep,
  type Value,
  type Vars,
} from './expression.ts';
import { compilePattern, type PathPattern } from './matcher.ts';

/**
 * HBP's shipped `custom/storage-rules/rules.yaml`. Not the default: under it anyone may overwrite or
 * delete anything under `/public`. A deployment that wants it back writes it to STORAGE_RULES_PATH.
 */
export const HBP_RULES = `functions:
  isAuthenticated: 'return !!request.auth'
  isOwner: "return !!request.auth && userId === request.auth['user-id']"
  validToken: 'return request.query.token === resource.Metadata.token'
paths:
  /user/:userId/:
    list: 'isOwner(userId)'
  /user/:userId/:fileId:
    read: 'isOwner(userId) || validToken()'
    write: 'isOwner(userId)'
  /public*:
    read: 'true'
    write: 'true'
`;

/**
 * The rules used when no rules file exists: HBP's, except that `/public` is written only by its owners.
 * Anyone reads and lists everything under `/public`; a signed-in user writes and deletes under
 * `/public/<their user id>/` and nowhere else there (and the admin secret, as everywhere).
 */
export const DEFAULT_RULES = `functions:
  isAuthenticated: 'return !!request.auth'
  isOwner: "return !!request.auth && userId === request.auth['user-id']"
  validToken: 'return request.query.token === resource.Metadata.token'
paths:
  /user/:userId/:
    list: 'isOwner(userId)'
  /user/:userId/:fileId:
    read: 'isOwner(userId) || validToken()'
    write: 'isOwner(userId)'
  /public/:userId/*:
    read: 'true'
    write: 'isOwner(userId)'
  /public*:
    read: 'true'
`;

export type RuleKey = 'create' | 'update' | 'write' | 'get' | 'list' | 'read' | 'delete';
export type Operation = 'create' | 'update' | 'get' | 'list' | 'delete';

const RULE_KEYS: readonly RuleKey[] = ['create', 'update', 'write', 'get', 'list', 'read', 'delete'];
/** Keys HBP accepted in a path entry and ignored. */
const IGNORED_KEYS = new Set(['meta', 'metadata']);

/**
 * Per operation: the keys that make an entry answer the request (HBP registered one Express route per
 * method for entries having any of them) and the keys tried, in order.
 */
const OPERATIONS: Record<Operation, { answers: readonly RuleKey[]; tries: readonly RuleKey[] }> = {
  create: { answers: ['write', 'create', 'update'], tries: ['create', 'write'] },
  update: { answers: ['write', 'create', 'update'], tries: ['update', 'write'] },
  get: { answers: ['read', 'get', 'list'], tries: ['get', 'read'] },
  list: { answers: ['read', 'get', 'list'], tries: ['list', 'read'] },
  delete: { answers: ['write', 'delete'], tries: ['delete', 'write'] },
};

export class RulesFileError extends Error {
  override name = 'RulesFileError';
}

interface Entry {
  pattern: PathPattern;
  rules: Partial<Record<RuleKey, CompiledExpression>>;
}

export interface RuleInput {
  /** `/` + the object key (`/user/abc/photo.png`, or `/user/abc/` for a folder). */
  path: string;
  method: string;
  query: Record<string, unknown>;
  /** The caller's un-prefixed permission variables; undefined when anonymous. */
  auth: Record<string, unknown> | undefined;
  /** The metadata object, the incoming file `{name, size, mimetype}`, or undefined. */
  resource: unknown;
}

export type Decision =
  | { allowed: true }
  /**
   * `entry`: the path pattern whose rules refused (none when no entry answers); `tried`: its rule keys
   * that were evaluated. `reason` adds what went wrong inside a rule, for operators only: an answer must
   * not carry it, since a rule reading a missing file's metadata fails where it would be false for a
   * file that exists.
   */
  | { allowed: false; reason: string; entry?: string; tried: readonly RuleKey[] }
  /** A rule read a value marked NOT_YET_KNOWN: decide again once it is known. */
  | { allowed: 'later' };

/**
 * How a decision was reached, for `gatehouse rules explain` and the service's debug log: the entries
 * that answer the operation in file order (those after the one that decided were never consulted), and
 * for the one whose path matched, each rule tried with every sub-expression's value.
 */
export interface Explanation {
  operation: Operation;
  path: string;
  entries: ExplainedEntry[];
  decision?: Decision;
}

export interface ExplainedEntry {
  pattern: string;
  /** The path variables, when the pattern matched. */
  vars?: Record<string, string>;
  rules: ExplainedRule[];
}

export interface ExplainedRule {
  key: RuleKey;
  expression: string;
  steps: TraceStep[];
  value?: Value;
  error?: string;
}

const ALLOWED: Decision = Object.freeze({ allowed: true });
const LATER: Decision = Object.freeze({ allowed: 'later' });

/**
 * What a rule of a matching entry can read: the path variables, `request` and `resource`. The last two
 * are copied into rule data on first use only, and then only the properties a rule reads (LazyRecord).
 */
class DecisionVars implements Vars {
  private request: Value | undefined;
  private resource: Value | undefined;
  private requestDone = false;
  private resourceDone = false;

  constructor(
    private readonly pathVars: Record<string, string>,
    private readonly input: RuleInput,
  ) {}

  has(name: string): boolean {
    return name === 'request' || name === 'resource' || Object.hasOwn(this.pathVars, name);
  }

  get(name: string): Value {
    // `request` and `resource` win over path variables of the same name.
    if (name === 'request') {
      if (!this.requestDone) {
        const { path, method, query, auth } = this.input;
        this.request = lazyValue({ path, method, query, auth });
        this.requestDone = true;
      }
      return this.request;
    }
    if (name === 'resource') {
      if (!this.resourceDone) {
        this.resource = lazyValue(this.input.resource);
        this.resourceDone = true;
      }
      return this.resource;
    }
    return Object.hasOwn(this.pathVars, name) ? this.pathVars[name] : undefined;
  }
}

export class StorageRules {
  /** Per operation, the entries that can answer it, in file order. */
  private readonly answering: Record<Operation, readonly Entry[]>;

  constructor(
    entries: readonly Entry[],
    private readonly functions: ReadonlyMap<string, RuleFunction>,
    readonly source: string,
  ) {
    const forOp = (op: Operation) => entries.filter((e) => OPERATIONS[op].answers.some((k) => e.rules[k]));
    this.answering = {
      create: forOp('create'),
      update: forOp('update'),
      get: forOp('get'),
      list: forOp('list'),
      delete: forOp('delete'),
    };
  }

  /** The path patterns of the entries that can answer `op`, in file order (the console's hints). */
  patterns(op: Operation): string[] {
    return this.answering[op].map((e) => e.pattern.source);
  }

  /** Decides `op` for `input`; with `explain`, records how (the same evaluation, traced). */
  decide(op: Operation, input: RuleInput, explain?: Explanation): Decision {
    const decision = this.evaluateRules(op, input, explain);
    if (explain) explain.decision = decision;
    return decision;
  }

  /** The evaluation of `decide` with a fresh explanation of it. */
  explain(op: Operation, input: RuleInput): Explanation & { decision: Decision } {
    const explanation: Explanation = { operation: op, path: input.path, entries: [] };
    this.decide(op, input, explanation);
    return explanation as Explanation & { decision: Decision };
  }

  private evaluateRules(op: Operation, input: RuleInput, explain: Explanation | undefined): Decision {
    const { tries } = OPERATIONS[op];
    for (const entry of this.answering[op]) {
      const pathVars = entry.pattern.match(input.path);
      const explained: ExplainedEntry | undefined = explain && {
        pattern: entry.pattern.source,
        vars: pathVars && { ...pathVars },
        rules: [],
      };
      if (explained) explain?.entries.push(explained);
      if (!pathVars) continue;
      const vars = new DecisionVars(pathVars, input);
      const tried = tries.filter((key) => entry.rules[key]);
      const denied = (reason: string): Decision => ({
        allowed: false,
        reason,
        entry: entry.pattern.source,
        tried,
      });
      for (const key of tried) {
        const rule = entry.rules[key] as CompiledExpression;
        const trace = explained ? new Trace() : undefined;
        const record: ExplainedRule | undefined = explained && {
          key,
          expression: rule.source,
          steps: (trace as Trace).steps,
        };
        if (record) explained?.rules.push(record);
        try {
          const value = evaluate(rule, { vars, functions: this.functions, trace });
          if (record) record.value = value;
          if (value) return ALLOWED;
        } catch (err) {
          if (record) record.error = (err as Error).message;
          if (err instanceof RuleNeedsValue) return LATER;
          if (err instanceof RuleError) return denied(`${entry.pattern.source} ${key}: ${err.message}`);
          throw err;
        }
      }
      return denied(`${entry.pattern.source}: no rule allows ${op}`);
    }
    return { allowed: false, reason: `no path rule answers ${op} on ${input.path}`, tried: [] };
  }
}

/** Loads `file`, or the built-in DEFAULT_RULES when it does not exist. Throws RulesFileError. */
export function loadRules(file: string): StorageRules {
  if (!existsSync(file)) return parseRules(DEFAULT_RULES, 'built-in default rules');
  return parseRules(readFileSync(file, 'utf8'), file);
}

const IDENT = /^[A-Za-z_$][\w$]*$/;
const RESERVED = new Set([
  'request',
  'resource',
  'undefined',
  'true',
  'false',
  'null',
  'constructor',
  '__proto__',
  'prototype',
]);

export function parseRules(text: string, source: string): StorageRules {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const at = (node: YamlNode | null | undefined) =>
    node?.range ? `${source}:${lines.linePos(node.range[0]).line}` : source;
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const line = e ? lines.linePos(e.pos[0]).line : undefined;
    throw new RulesFileError(
      `${source}${line ? `:${line}` : ''}: invalid YAML: ${e?.message.split('\n')[0]}`,
    );
  }
  const root = doc.contents;
  if (root === null || (isScalar(root) && root.value === null)) {
    return new StorageRules([], new Map(), source);
  }
  if (!isMap(root))
    throw new RulesFileError(`${at(root)}: the rules file must be a mapping with "functions" and "paths"`);

  const functions = new Map<string, RuleFunction>();
  const fnLines = new Map<string, string>();
  for (const pair of root.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : '';
    if (key !== 'functions' && key !== 'paths')
      throw new RulesFileError(
        `${at(pair.key as YamlNode)}: unknown section "${key}" (expected functions, paths)`,
      );
  }
  const fnNode = root.get('functions', true) as YamlNode | undefined;
  if (fnNode && !(isScalar(fnNode) && fnNode.value === null)) {
    if (!isMap(fnNode)) throw new RulesFileError(`${at(fnNode)}: "functions" must be a mapping`);
    for (const pair of fnNode.items) {
      const name = isScalar(pair.key) ? String(pair.key.value) : '';
      const where = `${at(pair.key as YamlNode)}: function "${name}"`;
      if (!IDENT.test(name) || RESERVED.has(name))
        throw new RulesFileError(`${where}: not a valid function name`);
      const value =
        (pair.value as YamlNode | null)?.toJSON?.() ?? (isScalar(pair.value) ? pair.value.value : undefined);
      let params: string[] = [];
      let code: unknown = value;
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        const obj = value as Record<string, unknown>;
        for (const k of Object.keys(obj)) {
          if (k !== 'params' && k !== 'code')
            throw new RulesFileError(`${where}: unknown key "${k}" (expected params, code)`);
        }
        params = Array.isArray(obj['params']) ? obj['params'].map(String) : [];
        if (obj['params'] !== undefined && !Array.isArray(obj['params']))
          throw new RulesFileError(`${where}: "params" must be a list of names`);
        for (const p of params) {
          if (!IDENT.test(p) || RESERVED.has(p))
            throw new RulesFileError(`${where}: "${p}" is not a valid parameter name`);
        }
        code = obj['code'];
      }
      if (typeof code !== 'string')
        throw new RulesFileError(`${where}: the body must be a string "return <expression>"`);
      const m = /^\s*(?:(["'])use strict\1\s*;?\s*)?return\s+([\s\S]*?)\s*;?\s*$/.exec(code);
      if (!m) throw new RulesFileError(`${where}: the body must be "return <expression>"`);
      let body: CompiledExpression;
      try {
        body = compileExpression(m[2] as string);
      } catch (err) {
        throw new RulesFileError(`${where}: ${(err as Error).message}`);
      }
      functions.set(name, { params, body });
      fnLines.set(name, where);
    }
  }
  for (const [name, fn] of functions) {
    for (const callee of fn.body.calls) {
      if (!functions.has(callee))
        throw new RulesFileError(`${fnLines.get(name)}: calls unknown function "${callee}"`);
    }
  }
  const cycle = findCycle(functions);
  if (cycle)
    throw new RulesFileError(
      `${fnLines.get(cycle[0] as string)}: functions call each other in a loop (${cycle.join(' → ')})`,
    );

  const entries: Entry[] = [];
  const pathsNode = root.get('paths', true) as YamlNode | undefined;
  if (pathsNode && !(isScalar(pathsNode) && pathsNode.value === null)) {
    if (!isMap(pathsNode)) throw new RulesFileError(`${at(pathsNode)}: "paths" must be a mapping`);
    for (const pair of pathsNode.items) {
      const pat = isScalar(pair.key) ? String(pair.key.value) : '';
      const where = `${at(pair.key as YamlNode)}: path "${pat}"`;
      let pattern: PathPattern;
      try {
        pattern = compilePattern(pat);
      } catch (err) {
        throw new RulesFileError(`${where}: ${(err as Error).message}`);
      }
      const rulesNode = pair.value as YamlNode | null;
      if (!isMap(rulesNode))
        throw new RulesFileError(`${where}: must map actions (${RULE_KEYS.join(', ')}) to rules`);
      const rules: Entry['rules'] = {};
      for (const r of rulesNode.items) {
        const key = isScalar(r.key) ? String(r.key.value) : '';
        const rw = `${at(r.key as YamlNode)}: path "${pat}" rule "${key}"`;
        if (IGNORED_KEYS.has(key)) continue;
        if (!(RULE_KEYS as readonly string[]).includes(key))
          throw new RulesFileError(`${rw}: unknown action (expected ${RULE_KEYS.join(', ')})`);
        const raw = isScalar(r.value) ? r.value.value : undefined;
        if (typeof raw !== 'string' && typeof raw !== 'boolean')
          throw new RulesFileError(`${rw}: the rule must be an expression string`);
        let expr: CompiledExpression;
        try {
          expr = compileExpression(String(raw));
        } catch (err) {
          throw new RulesFileError(`${rw}: ${(err as Error).message}`);
        }
        for (const name of expr.names) {
          if (name !== 'request' && name !== 'resource' && !pattern.names.includes(name))
            throw new RulesFileError(
              `${rw}: "${name}" is not defined (use request, resource or a path variable)`,
            );
        }
        for (const callee of expr.calls) {
          if (!functions.has(callee)) throw new RulesFileError(`${rw}: calls unknown function "${callee}"`);
        }
        rules[key as RuleKey] = expr;
      }
      entries.push({ pattern, rules });
    }
  }
  return new StorageRules(entries, functions, source);
}

function findCycle(functions: ReadonlyMap<string, RuleFunction>): string[] | undefined {
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (name: string): string[] | undefined => {
    if (state.get(name) === 'done') return undefined;
    if (state.get(name) === 'visiting') return [...stack.slice(stack.indexOf(name)), name];
    state.set(name, 'visiting');
    stack.push(name);
    for (const callee of functions.get(name)?.body.calls ?? []) {
      const c = visit(callee);
      if (c) return c;
    }
    stack.pop();
    state.set(name, 'done');
    return undefined;
  };
  for (const name of functions.keys()) {
    const c = visit(name);
    if (c) return c;
  }
  return undefined;
}
