/**
 * The mailer: renders a template and hands the message to nodemailer. Three modes, chosen once at start:
 * - `smtp`: SMTP_HOST is set;
 * - `outbox`: emails on, no SMTP_HOST, outside production: one `.eml` file per message in
 *   DATA_DIR/outbox and an info log line carrying the action link, so every flow can be clicked
 *   through on embedded defaults;
 * - `disabled`: EMAILS_ENABLED=false; `deliver` refuses with EMAILS_DISABLED.
 * Flows never call it: they write their emails to the durable outbox (outbox.ts), whose sender calls
 * `deliver` after the flow's transaction has committed, and retries when it throws.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';
import type StreamTransport from 'nodemailer/lib/stream-transport/index.js';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { emailEvent } from '../metrics/events.ts';
import { writeOutboxEntry } from './dev-outbox.ts';
import type { OutgoingEmail } from './port.ts';
import { renderTemplate } from './templates.ts';

export type { OutgoingEmail } from './port.ts';

export interface Mailer {
  readonly mode: 'smtp' | 'outbox' | 'disabled';
  /** False with EMAILS_ENABLED=false. */
  readonly sends: boolean;
  /**
   * Renders and delivers one message; resolves once the server (or the development outbox) has accepted
   * it, rejects with a DeliveryError when it has not.
   */
  deliver(email: OutgoingEmail, opts?: DeliveryOptions): Promise<void>;
  close(): Promise<void>;
}

export interface DeliveryOptions {
  /** Aborts the delivery (it then rejects with a DeliveryError); meant for before `onHanded`. */
  signal?: AbortSignal;
  /**
   * Called when the transport starts handing the message over (SMTP: the envelope, then the data, on a
   * connection whose server has greeted): from then on the server may accept it, and aborting could
   * send it twice. Before, nothing has left the service.
   */
  onHanded?: () => void;
}

/** A message the transport did not accept (server down, refused, a template that fails to render). */
export class DeliveryError extends Error {
  constructor(cause: unknown) {
    super('the email could not be delivered', { cause });
    this.name = 'DeliveryError';
  }
}

export interface MailerOptions {
  log: FastifyBaseLogger;
}

/** Builds the mailer for `config`; throws when the settings cannot work (production without SMTP_HOST). */
export function createMailer(config: Config, { log }: MailerOptions): Mailer {
  if (!config.EMAILS_ENABLED) {
    const needs = [
      !config.AUTO_ACTIVATE_NEW_USERS && 'AUTO_ACTIVATE_NEW_USERS=false (activation emails)',
      config.MAGIC_LINK_ENABLED && 'MAGIC_LINK_ENABLED',
      config.VERIFY_EMAILS && 'VERIFY_EMAILS',
      config.LOST_PASSWORD_ENABLED && 'LOST_PASSWORD_ENABLED',
      config.NOTIFY_EMAIL_CHANGE && 'NOTIFY_EMAIL_CHANGE',
    ].filter(Boolean);
    if (needs.length > 0)
      log.warn(
        { settings: needs },
        `EMAILS_ENABLED is false: emails these settings need are not sent (${needs.join(', ')})`,
      );
    const refuse = async () => {
      throw new AppError('EMAILS_DISABLED');
    };
    return { mode: 'disabled', sends: false, deliver: refuse, async close() {} };
  }
  if (!config.SMTP_HOST) {
    if (config.isProduction)
      throw new Error('SMTP_HOST is required in production when EMAILS_ENABLED is true');
    return outboxMailer(config, log);
  }
  const transport = lazyTransport({
    host: config.SMTP_HOST,
    port: config.SMTP_PORT,
    secure: config.SMTP_SECURE,
    auth: config.SMTP_USER ? { user: config.SMTP_USER, pass: config.SMTP_PASS } : undefined,
    authMethod: config.SMTP_AUTH_METHOD,
    // A server that is down or silent must fail the attempt in seconds (it is retried later). Once the
    // server talks, its answers may take longer (RFC 5321 allows ten minutes after a message's final dot):
    // giving up on a slow answer to a message the server then accepts would send it twice.
    connectionTimeout: config.SMTP_TIMEOUT_MS,
    greetingTimeout: config.SMTP_TIMEOUT_MS,
    socketTimeout: config.SMTP_SOCKET_TIMEOUT_MS,
  });
  return transportMailer('smtp', config, log, transport, async () => {});
}

/** The folder of the development outbox. */
export function outboxDir(config: Pick<Config, 'DATA_DIR'>): string {
  return path.resolve(config.DATA_DIR, 'outbox');
}

/**
 * The logger's mark for a line that shows a secret on purpose (http/logging.ts: the link in free text is
 * kept); a registered symbol because mail/ is a leaf that does not import the HTTP layer.
 */
const SHOWN_ON_PURPOSE = Symbol.for('gatehouse.log.shown-on-purpose');

function outboxMailer(config: Config, log: FastifyBaseLogger): Mailer {
  const dir = outboxDir(config);
  const transport = lazyTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  log.info({ outbox: dir }, `SMTP_HOST is not set: emails are written to ${dir} and their links logged`);
  return transportMailer('outbox', config, log, transport, async (email, info, rendered) => {
    // Owner only, whatever the umask (0700, as every folder of DATA_DIR: src/data-dir.ts).
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const file = path.join(dir, `${stamp}-${email.template}-${randomBytes(3).toString('hex')}.eml`);
    writeFileSync(file, (info as { message: Buffer }).message, { mode: 0o600 });
    const link = email.locals.link;
    // Beside it, what the console's outbox page shows (dev-outbox.ts), so that it needs no MIME parser.
    writeOutboxEntry(file, {
      date: new Date().toISOString(),
      to: email.to,
      subject: rendered.subject,
      template: email.template,
      text: rendered.text,
      ...(link ? { link } : {}),
    });
    log.info(
      {
        [SHOWN_ON_PURPOSE]: true,
        to: email.to,
        subject: rendered.subject,
        template: email.template,
        link,
        file,
      },
      `email to ${email.to} written to the outbox${link ? `; its link: ${link}` : ''}`,
    );
  });
}

/**
 * A transport made with the first email: nodemailer (~0.1 s of CPU to load) is loaded only by a service
 * that sends one.
 */
function lazyTransport(options: SMTPTransport.Options | StreamTransport.Options): LazyTransport {
  let made: Promise<Transporter> | undefined;
  return {
    get() {
      made ??= import('nodemailer').then((m) => watchHandOver(m.default.createTransport(options)));
      return made;
    },
    async close() {
      // Nothing to close when no email was sent.
      (await made?.catch(() => undefined))?.close();
    },
  };
}

/**
 * Every transport reads the message through `createReadStream` when it starts handing it over (the SMTP
 * transport right before MAIL FROM, once the server has greeted): that call is the moment after which a
 * delivery must not be aborted. The "stream" step runs on the compiled message, before it.
 */
function watchHandOver(transport: Transporter): Transporter {
  transport.use('stream', (mail, done) => {
    const onHanded = (mail.data as { onHanded?: () => void }).onHanded;
    const message = mail.message as unknown as { createReadStream: (...args: unknown[]) => unknown };
    if (onHanded) {
      const read = message.createReadStream.bind(message);
      message.createReadStream = (...args) => {
        onHanded();
        return read(...args);
      };
    }
    done();
  });
  return transport;
}

interface LazyTransport {
  get(): Promise<Transporter>;
  close(): Promise<void>;
}

function transportMailer(
  mode: 'smtp' | 'outbox',
  config: Config,
  log: FastifyBaseLogger,
  transport: LazyTransport,
  after: (email: OutgoingEmail, info: unknown, rendered: { subject: string; text: string }) => Promise<void>,
): Mailer {
  const deliver = async (email: OutgoingEmail, opts: DeliveryOptions = {}) => {
    let info: unknown;
    try {
      const rendered = renderTemplate(config.EMAIL_TEMPLATES_DIR, email.template, email.locals);
      info = await (await transport.get()).sendMail({
        from: config.SMTP_SENDER,
        to: email.to,
        subject: rendered.subject,
        text: rendered.text,
        html: rendered.html,
        headers: email.headers,
        // nodemailer (10.x) closes the connection when the signal aborts; its types do not list these.
        ...({ signal: opts.signal, onHanded: opts.onHanded } as object),
      });
      await after(email, info, rendered);
      emailEvent('sent', mode, email.template);
    } catch (err) {
      // Stopped on purpose (the service is stopping): not a failure of the transport.
      if (opts.signal?.aborted) throw new DeliveryError(err);
      emailEvent('failed', mode, email.template);
      // The address is personal data and the message holds a ticket: log neither, only what failed.
      log.warn({ err, template: email.template, mode }, 'email could not be sent');
      throw new DeliveryError(err);
    }
  };
  return {
    mode,
    sends: true,
    deliver,
    close: () => transport.close(),
  };
}
