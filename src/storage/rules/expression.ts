/**
 * The storage rules' expression language: the subset of JavaScript HBP's rules use, parsed by jsep and
 * evaluated by this walker over plain data only. HBP ran rules in notevil, which was escaped
 * (CVE-2021-23771) and handed rules the whole request object; here nothing reachable from a rule is a
 * function or a prototype:
 *
 * - values are `undefined`, `null`, booleans, numbers, strings, frozen arrays and null-prototype
 *   objects copied from the request, the resource and the path variables;
 * - member access reads own data properties only (plus `length` and indexes of strings and arrays);
 *   `constructor`, `__proto__` and `prototype` are errors wherever they appear;
 * - calls go to the rules file's functions or to `includes`, `startsWith`, `endsWith`, `indexOf` on a
 *   string or an array, with primitive arguments;
 * - there is no assignment, `this`, `new`, sequence, template or function syntax to begin with.
 *
 * Any error throws RuleError, and the caller denies.
 */
import jsep from 'jsep';

export class RuleError extends Error {
  override name = 'RuleError';
}

/** Thrown when a rule reads a value not known yet (an upload's size before its bytes arrived). */
export class RuleNeedsValue extends Error {
  override name = 'RuleNeedsValue';
}

/** Stands for a value that becomes known later; reading it throws RuleNeedsValue. */
export const NOT_YET_KNOWN: unique symbol = Symbol('not yet known');

export type Value =
  | undefined
  | null
  | boolean
  | number
  | string
  | typeof NOT_YET_KNOWN
  | readonly Value[]
  | LazyRecord
  | { readonly [key: string]: Value };

type Node = jsep.Expression;

const FORBIDDEN = new Set(['constructor', '__proto__', 'prototype']);
const METHODS = new Set(['includes', 'startsWith', 'endsWith', 'indexOf']);
const BINARY = new Set(['&&', '||', '===', '!==', '==', '!=', '<', '<=', '>', '>=', '+']);
const UNARY = new Set(['!', '-']);
const MAX_DEPTH = 32;
const MAX_LENGTH = 4096;

export interface CompiledExpression {
  readonly source: string;
  readonly ast: Node;
  /** Names of the rules-file functions it calls. */
  readonly calls: ReadonlySet<string>;
  /** Free identifiers it reads (not calls). */
  readonly names: ReadonlySet<string>;
}

/** Parses and checks an expression; throws RuleError with a message naming the problem. */
export function compileExpression(source: string): CompiledExpression {
  if (source.length > MAX_LENGTH) throw new RuleError(`expression longer than ${MAX_LENGTH} characters`);
  let ast: Node;
  try {
    ast = jsep(source);
  } catch (err) {
    throw new RuleError(`syntax error: ${(err as Error).message}`);
  }
  const calls = new Set<string>();
  const names = new Set<string>();
  check(ast, calls, names, 0);
  return { source, ast, calls, names };
}

function check(node: Node, calls: Set<string>, names: Set<string>, depth: number): void {
  if (depth > 64) throw new RuleError('expression nested too deeply');
  const d = depth + 1;
  switch (node.type) {
    case 'Literal': {
      const v = (node as jsep.Literal).value;
      if (v !== null && typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
        throw new RuleError('unsupported literal');
      return;
    }
    case 'Identifier': {
      const name = (node as jsep.Identifier).name;
      if (FORBIDDEN.has(name)) throw new RuleError(`"${name}" is not allowed`);
      if (name !== 'undefined') names.add(name);
      return;
    }
    case 'UnaryExpression': {
      const u = node as jsep.UnaryExpression;
      if (!UNARY.has(u.operator)) throw new RuleError(`operator "${u.operator}" is not allowed`);
      check(u.argument, calls, names, d);
      return;
    }
    case 'BinaryExpression': {
      const b = node as jsep.BinaryExpression;
      if (!BINARY.has(b.operator)) throw new RuleError(`operator "${b.operator}" is not allowed`);
      check(b.left, calls, names, d);
      check(b.right, calls, names, d);
      return;
    }
    case 'ConditionalExpression': {
      const c = node as jsep.ConditionalExpression;
      check(c.test, calls, names, d);
      check(c.consequent, calls, names, d);
      check(c.alternate, calls, names, d);
      return;
    }
    case 'ArrayExpression':
      for (const e of (node as jsep.ArrayExpression).elements) {
        if (e) check(e, calls, names, d);
      }
      return;
    case 'MemberExpression': {
      const m = node as jsep.MemberExpression;
      check(m.object, calls, names, d);
      if (m.computed) check(m.property, calls, names, d);
      const key = staticKey(m);
      if (key !== undefined && FORBIDDEN.has(key)) throw new RuleError(`"${key}" is not allowed`);
      return;
    }
    case 'CallExpression': {
      const c = node as jsep.CallExpression;
      for (const a of c.arguments) check(a, calls, names, d);
      if (c.callee.type === 'Identifier') {
        const name = (c.callee as jsep.Identifier).name;
        if (FORBIDDEN.has(name)) throw new RuleError(`"${name}" is not allowed`);
        calls.add(name);
        return;
      }
      if (c.callee.type === 'MemberExpression') {
        const m = c.callee as jsep.MemberExpression;
        const key = staticKey(m);
        if (m.computed || key === undefined || !METHODS.has(key))
          throw new RuleError(
            `only the methods ${[...METHODS].join(', ')} may be called, not "${key ?? '(computed)'}"`,
          );
        check(m.object, calls, names, d);
        return;
      }
      throw new RuleError('only functions of the rules file and string/array methods may be called');
    }
    default:
      throw new RuleError(`${describe(node)} is not allowed in a rule`);
  }
}

function describe(node: Node): string {
  switch (node.type) {
    case 'Compound':
      return 'more than one expression (or an unsupported keyword)';
    case 'ThisExpression':
      return '"this"';
    default:
      return `a ${node.type}`;
  }
}

function staticKey(m: jsep.MemberExpression): string | undefined {
  if (!m.computed && m.property.type === 'Identifier') return (m.property as jsep.Identifier).name;
  if (m.computed && m.property.type === 'Literal') return String((m.property as jsep.Literal).value);
  return undefined;
}

export interface RuleFunction {
  readonly params: readonly string[];
  readonly body: CompiledExpression;
}

/** The names an expression can read. A Map will do; `has` tells "not defined" from `undefined`. */
export interface Vars {
  has(name: string): boolean;
  get(name: string): Value;
}

export interface Scope {
  /** Names an expression can read: request, resource, path variables (and a function's parameters). */
  readonly vars: Vars;
  readonly functions: ReadonlyMap<string, RuleFunction>;
  /** When set, every sub-expression evaluated is recorded there with its value (rules explain). */
  readonly trace?: Trace;
}

/** One sub-expression as evaluated: its text, how deep it sits, and its value or the error it raised. */
export interface TraceStep {
  /** 0 for the rule itself; a sub-expression (or a called function's body) is one deeper than its parent. */
  readonly depth: number;
  readonly expression: string;
  value?: Value;
  error?: string;
}

/**
 * The record of an evaluation, in the order sub-expressions start (a tree, read with `depth`). The
 * evaluator is the one the service uses; a trace only watches it. Literals are not recorded, and
 * short-circuited operands do not appear, since they were not evaluated.
 */
export class Trace {
  readonly steps: TraceStep[] = [];
  depth = 0;
}

/** A function's parameters over the caller's names (a later parameter of the same name wins). */
class ParamVars implements Vars {
  constructor(
    private readonly params: readonly string[],
    private readonly args: readonly Value[],
    private readonly outer: Vars,
  ) {}
  has(name: string): boolean {
    return this.params.includes(name) || this.outer.has(name);
  }
  get(name: string): Value {
    const i = this.params.lastIndexOf(name);
    return i >= 0 ? this.args[i] : this.outer.get(name);
  }
}

export function evaluate(expr: CompiledExpression, scope: Scope): Value {
  return evalNode(expr.ast, scope, 0);
}

function evalNode(node: Node, scope: Scope, depth: number): Value {
  if (scope.trace === undefined || node.type === 'Literal') return evalStep(node, scope, depth);
  const trace = scope.trace;
  const step: TraceStep = { depth: trace.depth, expression: printNode(node) };
  trace.steps.push(step);
  trace.depth++;
  try {
    const v = evalStep(node, scope, depth);
    step.value = v;
    return v;
  } catch (err) {
    step.error = (err as Error).message;
    throw err;
  } finally {
    trace.depth--;
  }
}

function evalStep(node: Node, scope: Scope, depth: number): Value {
  switch (node.type) {
    case 'Literal':
      return (node as jsep.Literal).value as Value;
    case 'Identifier': {
      const name = (node as jsep.Identifier).name;
      if (name === 'undefined') return undefined;
      if (!scope.vars.has(name)) throw new RuleError(`"${name}" is not defined`);
      return known(scope.vars.get(name));
    }
    case 'UnaryExpression': {
      const u = node as jsep.UnaryExpression;
      const v = evalNode(u.argument, scope, depth);
      if (u.operator === '!') return !v;
      if (u.operator === '-' && typeof v === 'number') return -v;
      throw new RuleError(`operator "${u.operator}" needs a number`);
    }
    case 'BinaryExpression':
      return binary(node as jsep.BinaryExpression, scope, depth);
    case 'ConditionalExpression': {
      const c = node as jsep.ConditionalExpression;
      return evalNode(c.test, scope, depth)
        ? evalNode(c.consequent, scope, depth)
        : evalNode(c.alternate, scope, depth);
    }
    case 'ArrayExpression':
      return Object.freeze(
        (node as jsep.ArrayExpression).elements.map((e) => (e ? evalNode(e, scope, depth) : undefined)),
      );
    case 'MemberExpression':
      return member(node as jsep.MemberExpression, scope, depth);
    case 'CallExpression':
      return call(node as jsep.CallExpression, scope, depth);
    default:
      throw new RuleError(`${node.type} is not allowed in a rule`);
  }
}

/** The text of a parsed expression (what a trace shows for it), written back from its tree. */
export function printNode(node: Node): string {
  switch (node.type) {
    case 'Literal': {
      const l = node as jsep.Literal;
      return typeof l.raw === 'string' ? l.raw : JSON.stringify(l.value);
    }
    case 'Identifier':
      return (node as jsep.Identifier).name;
    case 'UnaryExpression': {
      const u = node as jsep.UnaryExpression;
      return `${u.operator}${operand(u.argument)}`;
    }
    case 'BinaryExpression': {
      const b = node as jsep.BinaryExpression;
      return `${operand(b.left)} ${b.operator} ${operand(b.right)}`;
    }
    case 'ConditionalExpression': {
      const c = node as jsep.ConditionalExpression;
      return `${operand(c.test)} ? ${operand(c.consequent)} : ${operand(c.alternate)}`;
    }
    case 'ArrayExpression':
      return `[${(node as jsep.ArrayExpression).elements.map((e) => (e ? printNode(e) : '')).join(', ')}]`;
    case 'MemberExpression': {
      const m = node as jsep.MemberExpression & { optional?: boolean };
      const obj = operand(m.object);
      if (m.computed) return `${obj}${m.optional ? '?.' : ''}[${printNode(m.property)}]`;
      return `${obj}${m.optional ? '?.' : '.'}${printNode(m.property)}`;
    }
    case 'CallExpression': {
      const c = node as jsep.CallExpression;
      return `${operand(c.callee)}(${c.arguments.map(printNode).join(', ')})`;
    }
    default:
      return node.type;
  }
}

/** A sub-expression inside a larger one, bracketed when it is itself an operation. */
function operand(node: Node): string {
  const text = printNode(node);
  return node.type === 'BinaryExpression' || node.type === 'ConditionalExpression' ? `(${text})` : text;
}

function known(v: Value): Value {
  if (v === NOT_YET_KNOWN) throw new RuleNeedsValue('the rule reads a value that is not known yet');
  return v;
}

function isObject(v: Value): v is { readonly [key: string]: Value } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof LazyRecord);
}

function member(m: jsep.MemberExpression, scope: Scope, depth: number): Value {
  const obj = evalNode(m.object, scope, depth);
  if (obj === undefined || obj === null) {
    if ((m as { optional?: boolean }).optional) return undefined;
    throw new RuleError(`cannot read a property of ${String(obj)}`);
  }
  const key = m.computed ? evalNode(m.property, scope, depth) : (m.property as jsep.Identifier).name;
  if (typeof key !== 'string' && typeof key !== 'number')
    throw new RuleError('a property name must be a string or a number');
  const k = String(key);
  if (FORBIDDEN.has(k)) throw new RuleError(`"${k}" is not allowed`);
  if (typeof obj === 'string' || Array.isArray(obj)) {
    const list = obj as string | readonly Value[];
    if (k === 'length') return list.length;
    if (/^(0|[1-9]\d{0,8})$/.test(k)) return known(list[Number(k)] as Value);
    throw new RuleError(`"${k}" cannot be read from a ${typeof obj === 'string' ? 'string' : 'list'}`);
  }
  if (obj instanceof LazyRecord) return known(obj.read(k));
  if (isObject(obj)) return Object.hasOwn(obj, k) ? known(obj[k]) : undefined;
  throw new RuleError(`cannot read "${k}" of a ${typeof obj}`);
}

function isPrimitive(v: Value): v is undefined | null | boolean | number | string {
  return v === undefined || v === null || ['boolean', 'number', 'string'].includes(typeof v);
}

function call(c: jsep.CallExpression, scope: Scope, depth: number): Value {
  if (depth >= MAX_DEPTH) throw new RuleError('functions call each other too deeply');
  const args = c.arguments.map((a) => evalNode(a, scope, depth));
  if (c.callee.type === 'Identifier') {
    const name = (c.callee as jsep.Identifier).name;
    const fn = scope.functions.get(name);
    if (!fn) throw new RuleError(`function "${name}" is not defined`);
    const vars = new ParamVars(fn.params, args, scope.vars);
    return evalNode(fn.body.ast, { vars, functions: scope.functions, trace: scope.trace }, depth + 1);
  }
  const m = c.callee as jsep.MemberExpression;
  const method = (m.property as jsep.Identifier).name;
  if (m.computed || !METHODS.has(method)) throw new RuleError(`"${method}" cannot be called`);
  const receiver = evalNode(m.object, scope, depth);
  if (!args.every(isPrimitive)) throw new RuleError(`arguments of ${method} must be strings or numbers`);
  if (typeof receiver === 'string') {
    switch (method) {
      case 'includes':
        return receiver.includes(String(args[0]), num(args[1]));
      case 'startsWith':
        return receiver.startsWith(String(args[0]), num(args[1]));
      case 'endsWith':
        return receiver.endsWith(String(args[0]), num(args[1]));
      default:
        return receiver.indexOf(String(args[0]), num(args[1]));
    }
  }
  if (Array.isArray(receiver)) {
    const list = receiver as readonly Value[];
    if (method === 'includes') return list.includes(args[0]);
    if (method === 'indexOf') return list.indexOf(args[0]);
  }
  throw new RuleError(`"${method}" cannot be called on ${receiver === null ? 'null' : typeof receiver}`);
}

function num(v: Value): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number') throw new RuleError('a position must be a number');
  return v;
}

function binary(b: jsep.BinaryExpression, scope: Scope, depth: number): Value {
  const left = evalNode(b.left, scope, depth);
  if (b.operator === '&&') return left ? evalNode(b.right, scope, depth) : left;
  if (b.operator === '||') return left ? left : evalNode(b.right, scope, depth);
  const right = evalNode(b.right, scope, depth);
  switch (b.operator) {
    case '===':
      return left === right;
    case '!==':
      return left !== right;
    case '==':
      return looseEqual(left, right);
    case '!=':
      return !looseEqual(left, right);
    case '+':
      if (typeof left === 'string' && typeof right === 'string') return left + right;
      if (typeof left === 'number' && typeof right === 'number') return left + right;
      throw new RuleError('"+" needs two strings or two numbers');
    default: {
      const bothNumbers = typeof left === 'number' && typeof right === 'number';
      const bothStrings = typeof left === 'string' && typeof right === 'string';
      if (!bothNumbers && !bothStrings)
        throw new RuleError(`"${b.operator}" needs two numbers or two strings`);
      const l = left as number | string;
      const r = right as number | string;
      if (b.operator === '<') return l < r;
      if (b.operator === '<=') return l <= r;
      if (b.operator === '>') return l > r;
      return l >= r;
    }
  }
}

/** JavaScript's `==` on primitives (never coercing lists or objects, which could run code in JS). */
function looseEqual(a: Value, b: Value): boolean {
  if (isPrimitive(a) && isPrimitive(b)) {
    // biome-ignore lint/suspicious/noDoubleEquals: HBP rules were JavaScript; `==` keeps its meaning here.
    return a == b;
  }
  return a === b;
}

/**
 * Whether `v` can never change: primitives, and frozen arrays and plain objects whose own properties are
 * data properties (no getters) holding such values. A Date or any class instance does not qualify.
 */
function isImmutableData(v: unknown, depth: number): boolean {
  if (v === null || typeof v !== 'object') return typeof v !== 'function';
  if (depth > 16 || !Object.isFrozen(v)) return false;
  if (!Array.isArray(v)) {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return false;
  }
  for (const d of Object.values(Object.getOwnPropertyDescriptors(v))) {
    if (!('value' in d) || !isImmutableData(d.value, depth + 1)) return false;
  }
  return true;
}

/**
 * Copies of immutable objects, by object and depth: the permission variables of a verified access token
 * are frozen and shared by every request that presents it, so their copy is made once.
 */
const immutableCopies = new WeakMap<object, { depth: number; value: Value }>();

/**
 * Copies a JavaScript value into rule data: null-prototype objects and frozen arrays, no functions,
 * symbols (other than NOT_YET_KNOWN) or class instances (a Date becomes its ISO string).
 */
export function toValue(v: unknown, depth = 0): Value {
  if (v === NOT_YET_KNOWN) return NOT_YET_KNOWN;
  if (v === null || v === undefined) return v as null | undefined;
  switch (typeof v) {
    case 'string':
    case 'number':
    case 'boolean':
      return v;
    case 'bigint':
      return Number(v);
    case 'object':
      break;
    default:
      return undefined;
  }
  if (depth > 16) return undefined;
  if (v instanceof Date) return v.toISOString();
  const memo = immutableCopies.get(v as object);
  if (memo && memo.depth === depth) return memo.value;
  let out: Value;
  if (Array.isArray(v)) out = Object.freeze(v.map((x) => toValue(x, depth + 1)));
  else {
    const o: Record<string, Value> = Object.create(null);
    // Own enumerable string keys, in order (as Object.entries, without its pair arrays).
    for (const k of Object.keys(v as object)) {
      if (!FORBIDDEN.has(k)) o[k] = toValue((v as Record<string, unknown>)[k], depth + 1);
    }
    out = Object.freeze(o);
  }
  // Frozen stays frozen, so the copy of an immutable object stays right for as long as it exists.
  if (Object.isFrozen(v) && isImmutableData(v, depth))
    immutableCopies.set(v as object, { depth, value: out });
  return out;
}

const isEnumerableOwn = (o: object, k: string) => Object.prototype.propertyIsEnumerable.call(o, k);

/**
 * Rule data over a plain JavaScript object, copied a property at a time as rules read it: reading `k`
 * gives what `toValue(source)[k]` would hold, but a decision that reads `request.auth['user-id']` no
 * longer copies the whole request, query and resource first. Rules see it as an object: member access
 * goes through `read` (own enumerable properties, forbidden names excluded, as toValue), and nothing
 * else of the instance (its source, its methods) is reachable from a rule. Each property is copied
 * once, so reading it twice gives the same value (`request.auth === request.auth`).
 */
export class LazyRecord {
  readonly #source: object;
  readonly #depth: number;
  readonly #copies = new Map<string, Value>();

  constructor(source: object, depth: number) {
    this.#source = source;
    this.#depth = depth;
  }

  /** The whole record as rule data (for a trace to show; rules themselves only `read`). */
  static snapshot(record: LazyRecord): Value {
    return toValue(record.#source, record.#depth);
  }

  read(key: string): Value {
    if (this.#copies.has(key)) return this.#copies.get(key);
    const v =
      !FORBIDDEN.has(key) && isEnumerableOwn(this.#source, key)
        ? lazyValue((this.#source as Record<string, unknown>)[key], this.#depth + 1)
        : undefined;
    this.#copies.set(key, v);
    return v;
  }
}

/**
 * toValue for the evaluator, deferring the copy of plain objects to LazyRecord; everything else
 * (primitives, Dates, arrays, immutable objects with a copy already made) is exactly toValue.
 */
export function lazyValue(v: unknown, depth = 0): Value {
  if (v === null || typeof v !== 'object' || depth > 16 || v instanceof Date || Array.isArray(v))
    return toValue(v, depth);
  const memo = immutableCopies.get(v);
  if (memo && memo.depth === depth) return memo.value;
  if (Object.isFrozen(v) && isImmutableData(v, depth)) return toValue(v, depth);
  return new LazyRecord(v, depth);
}
