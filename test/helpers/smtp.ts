/**
 * A real SMTP server in the test process (smtp-server), capturing every delivered message parsed by
 * mailparser. `stop()` closes the port so clients get "connection refused"; `refuse` makes the server
 * answer 550 to every recipient.
 */
import type { AddressInfo } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface CapturedMail {
  to: string[];
  from: string;
  subject: string;
  text: string;
  html: string;
  headers: Map<string, unknown>;
  raw: ParsedMail;
}

export interface TestSmtp {
  port: number;
  messages: CapturedMail[];
  /** When true the server refuses every recipient with a 550. */
  refuse: boolean;
  /**
   * Called with each message the moment it has been received and parsed, before the server answers the
   * client: a test can act on an email at the instant it arrives (follow its link at once).
   */
  onMessage: ((mail: CapturedMail) => void) | undefined;
  /** The messages sent to `to` (case-insensitive). */
  to(address: string): CapturedMail[];
  /** The last message sent to `to`; throws when there is none. */
  last(address: string): CapturedMail;
  clear(): void;
  stop(): Promise<void>;
  /** Listens again on the same port after `stop()`. */
  start(): Promise<void>;
}

export async function startSmtp(): Promise<TestSmtp> {
  const messages: CapturedMail[] = [];
  const state: { refuse: boolean; onMessage: ((mail: CapturedMail) => void) | undefined } = {
    refuse: false,
    onMessage: undefined,
  };
  const make = () =>
    new SMTPServer({
      secure: false,
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      // No DNS lookup of each client (127.0.0.1): a slow resolver would delay every greeting.
      disableReverseLookup: true,
      logger: false,
      onRcptTo(_address, _session, cb) {
        if (state.refuse) {
          const err = Object.assign(new Error('Mailbox unavailable'), { responseCode: 550 });
          cb(err);
          return;
        }
        cb();
      },
      onData(stream, session, cb) {
        simpleParser(stream)
          .then((mail) => {
            const captured: CapturedMail = {
              to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
              from: typeof session.envelope.mailFrom === 'object' ? session.envelope.mailFrom.address : '',
              subject: mail.subject ?? '',
              text: mail.text ?? '',
              html: typeof mail.html === 'string' ? mail.html : '',
              headers: mail.headers as Map<string, unknown>,
              raw: mail,
            };
            messages.push(captured);
            state.onMessage?.(captured);
            cb();
          })
          .catch(cb);
      },
    });
  let server = make();
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.server.address() as AddressInfo).port));
    });
  const port = await listen(0);
  const api: TestSmtp = {
    port,
    messages,
    get refuse() {
      return state.refuse;
    },
    set refuse(v: boolean) {
      state.refuse = v;
    },
    get onMessage() {
      return state.onMessage;
    },
    set onMessage(fn) {
      state.onMessage = fn;
    },
    to(address) {
      const a = address.toLowerCase();
      return messages.filter((m) => m.to.includes(a));
    },
    last(address) {
      const list = api.to(address);
      const m = list[list.length - 1];
      if (!m) throw new Error(`no email was delivered to ${address}`);
      return m;
    },
    clear() {
      messages.length = 0;
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
    async start() {
      server = make();
      await listen(port);
    },
  };
  return api;
}

/** The first link in `text` that contains `pathPart` (e.g. `/auth/activate`). */
export function findLink(text: string, pathPart: string): URL {
  for (const m of text.matchAll(/https?:\/\/[^\s"'<>)]+/g)) {
    if (m[0].includes(pathPart)) return new URL(m[0].replace(/&amp;/g, '&'));
  }
  throw new Error(`no link containing ${pathPart} in:\n${text}`);
}
