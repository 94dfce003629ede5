/**
 * `gatehouse storage reconcile`: compares the object store with the files table and repairs the table
 * (storage/files.ts): objects without a row are imported (owner: no one), rows that describe their
 * object wrongly are updated, rows whose object is gone are removed, and uploads cut off before their
 * row was written are completed for their uploader. The first start on a store does the import by
 * itself; this is for objects written around the service, or at a time of the operator's choosing.
 */
import { createObjectStore } from '../../storage/backends/index.ts';
import { FileCatalog, markStoreImported, reconcile, repairInterrupted } from '../../storage/files.ts';
import { type CliIO, type Command, configOf, parseOptions, subcommands } from '../command.ts';
import { withDatabase } from '../database.ts';

const reconcileCmd = {
  summary: 'Bring storage.files in step with the object store',
  help: `Usage: gatehouse storage reconcile [--json] [--keep-stale]

Lists every object of the configured store (S3_* settings, or DATA_DIR/storage) and compares it with
storage.files: an object without a row is imported (owned by no one, so in no quota), a row whose
object changed is updated, a row whose object is gone is removed (unless --keep-stale), and uploads cut
off by a crash (their reservation has run out) are completed for their uploader. Safe while the
service runs. Prints what it did; --json prints it as an object.`,
  async run(args: string[], io: CliIO) {
    const { flags } = parseOptions(args, { flags: ['json', 'keep-stale'] });
    const config = configOf(io);
    if (!config.STORAGE_ENABLED) {
      io.err('storage is switched off (STORAGE_ENABLED=false): nothing to reconcile\n');
      return 1;
    }
    const objects = await createObjectStore(config);
    try {
      return await withDatabase(
        config,
        async ({ db, clock }) => {
          const deps = { config, db, clock, objects, catalog: new FileCatalog(), images: noImages };
          const interrupted = await repairInterrupted(deps);
          const report = await reconcile(deps, { removeStale: !flags.has('keep-stale') });
          await markStoreImported(deps, report.imported);
          const result = { ...report, completed: interrupted.completed };
          if (flags.has('json')) io.out(`${JSON.stringify(result)}\n`);
          else
            io.out(
              `${report.objects} object(s) compared: ${report.imported} imported, ${report.updated} updated, ${report.removed} stale row(s) removed, ${interrupted.completed} cut-off upload(s) completed\n`,
            );
          return 0;
        },
        io,
      );
    } finally {
      await objects.close();
    }
  },
};

/**
 * The CLI holds no image cache of its own; the service's cached variants of a file the reconcile
 * completes are keyed by the source's ETag and are not served for a new version.
 */
const noImages = { forget: async () => {} };

const storage: Command = {
  name: 'storage',
  summary: 'Storage upkeep: reconcile the files table with the object store',
  help: `Usage: gatehouse storage <subcommand> [options]

  reconcile  ${reconcileCmd.summary}

Run gatehouse storage <subcommand> --help for its options.`,
  run: subcommands('storage', { reconcile: reconcileCmd }),
};

export default storage;
