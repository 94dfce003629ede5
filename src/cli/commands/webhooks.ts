/**
 * `gatehouse webhooks`: the webhook deliveries of the durable outbox, for an operator. `list-failed`
 * shows the ones given up (WEBHOOK_MAX_ATTEMPTS reached) and still kept, with their last error.
 */
import { listFailedRows } from '../../mail/outbox-store.ts';
import { WEBHOOK_KIND } from '../../webhooks/webhooks.ts';
import { type CliIO, type Command, configOf, parseOptions, subcommands } from '../command.ts';
import { withDatabase } from '../database.ts';

const listFailed = {
  summary: 'List the webhook deliveries given up',
  help: `Usage: gatehouse webhooks list-failed [--limit N] [--json]

One line per webhook delivery given up after WEBHOOK_MAX_ATTEMPTS, newest first: when it was given up,
the event type, its webhook-id, the receiver, the attempts and the last error. They are kept for
EMAIL_FAILED_RETENTION_HOURS. --json prints an array of objects instead.

  --limit N   at most N deliveries (default 100)`,
  async run(args: string[], io: CliIO) {
    const { flags, values } = parseOptions(args, { flags: ['json'], values: ['limit'] });
    const limit = values['limit'] === undefined ? 100 : Number(values['limit']);
    if (!Number.isSafeInteger(limit) || limit < 1) {
      io.err('--limit must be a whole number of at least 1\n');
      return 2;
    }
    return withDatabase(
      configOf(io),
      async ({ db }) => {
        const rows = await listFailedRows(db, WEBHOOK_KIND, limit);
        if (flags.has('json')) {
          const out = rows.map((r) => ({
            webhook_id: r.delivery_id,
            type: r.template,
            url: r.recipient,
            attempts: r.attempts,
            created_at: r.created_at.toISOString(),
            failed_at: r.failed_at.toISOString(),
            last_error: r.last_error,
          }));
          io.out(`${JSON.stringify(out, null, 2)}\n`);
          return 0;
        }
        for (const r of rows)
          io.out(
            `${r.failed_at.toISOString()}  ${r.template}  ${r.delivery_id}  ${r.recipient}  ${r.attempts} attempts  ${r.last_error ?? ''}\n`,
          );
        if (rows.length === 0) io.err('no webhook delivery has been given up\n');
        return 0;
      },
      io,
    );
  },
};

const subs = { 'list-failed': listFailed };

const webhooks: Command = {
  name: 'webhooks',
  summary: 'Webhook deliveries: list-failed',
  help: `Usage: gatehouse webhooks <subcommand> [options]

${Object.entries(subs)
  .map(([n, s]) => `  ${n.padEnd(11)}  ${s.summary}`)
  .join('\n')}

Run gatehouse webhooks <subcommand> --help for its options.`,
  run: subcommands('webhooks', subs),
};

export default webhooks;
