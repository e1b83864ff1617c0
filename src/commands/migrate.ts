import { Command } from 'commander';
import { commandAction, withDb } from '../context.js';
import { migrate } from '../db/migrate.js';

/** `review-mirror migrate`. */
export function migrateCommand(): Command {
  return new Command('migrate').description('create or upgrade the database schema, then exit').action(
    commandAction(async (ctx) => {
      const applied = await withDb(ctx, migrate);
      process.stdout.write(
        applied.length === 0 ? 'schema is up to date\n' : `applied: ${applied.join(', ')}\n`,
      );
    }),
  );
}
