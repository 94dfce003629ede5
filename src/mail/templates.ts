/**
 * Email templates: one per flow, each with a subject, an HTML body and a plain-text body. The built-in
 * texts live here; operators override any file by pointing EMAIL_TEMPLATES_DIR at a folder laid out like
 * HBP's `custom/emails/<template>/{subject,html}.ejs` (a `text.ejs` is optional: without it the text part
 * is derived from the HTML). `<template>/<locale>/` folders are tried first when a locale is known.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import ejs from 'ejs';
import { htmlToText } from './html-to-text.ts';

export const TEMPLATE_NAMES = [
  'activate-account',
  'magic-link',
  'change-email',
  'lost-password',
  'notify-email-change',
  'email-in-use',
  'account-exists',
  'new-sign-in',
  'email-code',
] as const;
export type TemplateName = (typeof TEMPLATE_NAMES)[number];

/**
 * The variables every template sees. HBP's locals keep their names (`display_name`, `ticket`, `token`,
 * `url` = SERVER_URL, `action`, `action_url`); `link` is the full action link, `email` the recipient.
 * String locals other than these service-made ones (`display_name`, `new_email`, …) are text a user
 * chose, often someone other than the recipient: see userText.
 */
export interface TemplateLocals {
  display_name: string;
  url: string;
  email: string;
  link?: string;
  ticket?: string;
  token?: string;
  action?: string;
  action_url?: string;
  locale?: string;
  [extra: string]: unknown;
}

export interface RenderedEmail {
  subject: string;
  html: string;
  text: string;
}

const esc = (v: unknown): string =>
  String(v ?? '').replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/**
 * Locals the service makes itself (links, tickets, the recipient's own address): used as they are.
 * Every other string local is user text (safeLocals).
 */
const SERVICE_LOCALS = new Set([
  'url',
  'email',
  'link',
  'ticket',
  'token',
  'code',
  'action',
  'action_url',
  'locale',
]);

/** The longest user-chosen text an email shows, in characters. */
export const USER_TEXT_MAX = 64;

/** Bidirectional controls, which can make text read in another order than it is written. */
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
/** Characters mail clients build links around (scheme, host and path separators, their full-width twins). */
const LINK_SEPARATORS = /([.:/\\@\u3002\uFF0E\uFF61\uFF1A\uFF0F])(?=\S)/g;
const ZERO_WIDTH_SPACE = '\u200B';

/** One line: control characters, line breaks and bidirectional controls removed. */
function oneLine(value: string): string {
  return value
    .replace(/[\p{Cc}\p{Zl}\p{Zp}]+/gu, ' ')
    .replace(BIDI, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Text a user chose, made safe to show in an email sent to someone who may not have chosen it: one line
 * (control characters, line breaks and bidirectional controls removed), at most `max` characters (then
 * an ellipsis), and not recognisable as a link or an address (a zero-width space after each `.`, `:`,
 * `/`, `\`, `@`), so that no mail client turns `http://evil.example` into something to click. HTML
 * escaping is left to the HTML rendering.
 */
export function userText(value: string, max = USER_TEXT_MAX): string {
  const line = oneLine(value);
  const chars = Array.from(line);
  const cut =
    chars.length > max
      ? `${chars
          .slice(0, max - 1)
          .join('')
          .trimEnd()}…`
      : line;
  return cut.replace(LINK_SEPARATORS, `$1${ZERO_WIDTH_SPACE}`);
}

/**
 * User text already escaped for HTML. An operator's html.ejs gets user text in this form, so that it
 * comes out escaped whether the template writes `<%= display_name %>` or `<%- display_name %>`.
 */
class EscapedText extends String {}

const escapeHtml = (v: unknown): string => (v instanceof EscapedText ? v.valueOf() : esc(v));

/** The locals with every user-chosen string made safe (userText); `html`: also escaped, as EscapedText. */
function safeLocals(locals: TemplateLocals, html: boolean): TemplateLocals {
  const out: TemplateLocals = { ...locals };
  for (const [key, value] of Object.entries(locals)) {
    if (SERVICE_LOCALS.has(key) || typeof value !== 'string') continue;
    // An address (`new_email`…) passed the schema's email format: shown whole, so it can be checked.
    const text = key.endsWith('email') ? oneLine(value) : userText(value);
    out[key] = html ? new EscapedText(esc(text)) : text;
  }
  return out;
}

/** Registration links that will not keep a password or choice (see auth/flows/registration.ts) say so. */
const CHOICES_NOT_KEPT =
  'This address received more than one request (to register, or to send this link again), so for your safety this link confirms the address without keeping a password or settings chosen when registering: once confirmed, you can choose a password (“Forgot password?” on the sign-in page).';

interface Default {
  subject(l: TemplateLocals): string;
  /** Paragraphs of the message; the action link is added after them as a button and as text. */
  lines(l: TemplateLocals): string[];
  button?: string;
  after?(l: TemplateLocals): string[];
}

const DEFAULTS: Record<TemplateName, Default> = {
  'activate-account': {
    subject: () => 'Confirm your email address',
    lines: (l) => [`Hello ${l.display_name},`, 'Please confirm your email address to activate your account.'],
    button: 'Activate my account',
    after: (l) => [
      ...(l.keeps_choices === false ? [CHOICES_NOT_KEPT] : []),
      'If you did not create an account, you can ignore this email.',
    ],
  },
  'magic-link': {
    subject: (l) => `Secure ${l.action ?? 'log in'} link`,
    lines: (l) => [
      `Hello ${l.display_name},`,
      `Use the link below to ${l.action ?? 'log in'}. It works once and expires soon.`,
    ],
    button: 'Continue',
    after: (l) => [
      ...(l.keeps_choices === false ? [CHOICES_NOT_KEPT] : []),
      'If you did not ask for this link, you can ignore this email.',
    ],
  },
  'change-email': {
    subject: () => 'Change your email address',
    lines: (l) => [
      `Hello ${l.display_name},`,
      'Someone asked to use this address for their account. Confirm the change with the link below.',
    ],
    button: 'Confirm my new address',
    after: (l) => [
      `Your confirmation code is: ${l.ticket ?? ''}`,
      'If you did not ask for this, you can ignore this email; nothing changes.',
    ],
  },
  'lost-password': {
    subject: () => 'Reset your password',
    lines: (l) => [`Hello ${l.display_name},`, 'Choose a new password for your account with the link below.'],
    button: 'Reset my password',
    after: (l) => [
      `Your reset code is: ${l.ticket ?? ''}`,
      'If you did not ask for a new password, you can ignore this email; your password stays the same.',
    ],
  },
  'notify-email-change': {
    subject: () => 'The email attached to your account has been changed',
    lines: (l) => [
      `Hello ${l.display_name},`,
      `The email address of your account was changed${l.new_email ? ` to ${String(l.new_email)}` : ''}.`,
      'If you did not make this change, contact support at once.',
    ],
    button: 'Open the application',
  },
  'email-in-use': {
    subject: () => 'Someone tried to use your email address',
    lines: (l) => [
      `Hello ${l.display_name},`,
      'Someone asked to move an account to this email address. The address is already in use, so nothing was changed.',
      'If it was you, sign in with this address instead. If not, you can ignore this email.',
    ],
    button: 'Open the application',
  },
  'account-exists': {
    subject: () => 'You already have an account',
    lines: (l) => [
      `Hello ${l.display_name},`,
      'Someone, perhaps you, tried to create an account with this email address. You already have one, so nothing was changed.',
      l.lost_password === false
        ? 'Sign in with your password.'
        : 'Sign in with your password; if you forgot it, ask for a new one from the sign-in page.',
    ],
    button: 'Sign in',
    after: () => ['If you did not try to register, you can ignore this email.'],
  },
  'new-sign-in': {
    subject: () => 'New sign-in to your account',
    lines: (l) => [
      `Hello ${l.display_name},`,
      `Your account was signed in from a device it has not used recently: ${String(l.device ?? 'unknown')}, network ${String(l.network ?? 'unknown')}, at ${String(l.time ?? '')} (${String(l.sign_in_method ?? 'unknown')}).`,
      'If it was you, there is nothing to do.',
      'If not, change your password now and end that session from the list of your sessions in the application.',
    ],
    button: 'Open the application',
  },
  'email-code': {
    subject: (l) => `Your ${l.action === 'register' ? 'sign-up' : 'sign-in'} code: ${String(l.code ?? '')}`,
    lines: (l) => [
      `Hello ${l.display_name},`,
      `Your ${l.action === 'register' ? 'sign-up' : 'sign-in'} code is: ${String(l.code ?? '')}`,
      `Type it in the app within ${String(l.minutes ?? 10)} minutes. It works once; never give it to anyone.`,
    ],
    button: 'Or continue with this link',
    after: () => ['If you did not ask for this code, you can ignore this email.'],
  },
};

function renderDefault(name: TemplateName, l: TemplateLocals): RenderedEmail {
  const d = DEFAULTS[name];
  const lines = d.lines(l);
  const after = d.after?.(l) ?? [];
  const link = l.link ?? l.url;
  const html = [
    '<!doctype html>',
    `<html><head><meta charset="utf-8"><title>${esc(d.subject(l))}</title></head>`,
    '<body style="font-family:sans-serif;line-height:1.5">',
    ...lines.map((p) => `<p>${esc(p)}</p>`),
    `<p><a href="${esc(link)}">${esc(d.button ?? link)}</a></p>`,
    `<p style="font-size:small">Or open this link: ${esc(link)}</p>`,
    ...after.map((p) => `<p>${esc(p)}</p>`),
    '</body></html>',
  ].join('\n');
  const text = [...lines, `${d.button ?? 'Open'}: ${link}`, ...after].join('\n\n');
  return { subject: d.subject(l), html, text: `${text}\n` };
}

/** Locales are folder names: refuse anything that could walk out of the template folder. */
const LOCALE = /^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$/;

/** The `locale` field of registration: a language tag such as `fr` or `pt-BR`. */
export const Locale = Type.String({
  pattern: LOCALE.source,
  maxLength: 35,
  description:
    'Language of the account’s emails: templates come from EMAIL_TEMPLATES_DIR/<template>/<locale>/ when present.',
});

function candidateDirs(root: string, name: TemplateName, locale: string | undefined): string[] {
  const dirs: string[] = [];
  if (locale && LOCALE.test(locale)) {
    dirs.push(path.join(root, name, locale));
    const base = locale.split(/[-_]/)[0] as string;
    if (base !== locale) dirs.push(path.join(root, name, base));
  }
  dirs.push(path.join(root, name));
  return dirs;
}

function findFile(dirs: string[], file: string): string | undefined {
  for (const d of dirs) {
    const p = path.join(d, file);
    if (existsSync(p)) return p;
  }
  return undefined;
}

/**
 * Templates are the operator's own files (trusted, like HBP's); `filename` lets them use include().
 * `<%= %>` escapes HTML only in html.ejs: in a subject or a text part the escapes would show as is.
 */
function renderEjs(file: string, locals: TemplateLocals, html: boolean): string {
  return ejs.render(readFileSync(file, 'utf8'), safeLocals(locals, html), {
    filename: file,
    async: false,
    escape: html ? escapeHtml : (v: unknown) => String(v ?? ''),
  });
}

/**
 * Renders `name` with `locals`. Each of subject, html and text comes from the first override file found
 * (locale folder, then template folder) and otherwise from the built-in text. Files are read on every
 * render so an operator's edits apply without a restart. User-chosen locals are made safe here, for
 * every template alike (safeLocals).
 */
export function renderTemplate(
  templatesDir: string,
  name: TemplateName,
  locals: TemplateLocals,
): RenderedEmail {
  const dirs = candidateDirs(templatesDir, name, locals.locale);
  const subjectFile = findFile(dirs, 'subject.ejs');
  const htmlFile = findFile(dirs, 'html.ejs');
  const textFile = findFile(dirs, 'text.ejs');
  const fallback =
    subjectFile && htmlFile && textFile ? undefined : renderDefault(name, safeLocals(locals, false));
  const subject = subjectFile ? renderEjs(subjectFile, locals, false) : (fallback as RenderedEmail).subject;
  const html = htmlFile ? renderEjs(htmlFile, locals, true) : (fallback as RenderedEmail).html;
  const text = textFile
    ? renderEjs(textFile, locals, false)
    : htmlFile
      ? htmlToText(html)
      : (fallback as RenderedEmail).text;
  // A subject is one header line: fold whatever the template produced.
  return { subject: subject.replace(/\s+/g, ' ').trim(), html, text };
}
