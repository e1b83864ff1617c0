import { Command } from 'commander';
import { ConfigError } from '../config/schema.js';
import { commandAction, withDb } from '../context.js';
import { migrate } from '../db/migrate.js';
import { grantReader, roleExists } from '../db/readerGrantsSql.js';

/** `review-mirror grant-reader ROLE`: a read-only role on the mirror, for BI tools and analysts. */
export function grantReaderCommand(): Command {
  return new Command('grant-reader')
    .description(
      "grant an existing PostgreSQL role read-only access to the mirror's tables and views (for BI tools)",
    )
    .argument('<role>', 'the role to grant (create it first, e.g. create role bi login password ...)')
    .action(
      commandAction(async (ctx, role: string) => {
        // Roles and grants belong to a PostgreSQL server; the embedded database has one user.
        if (ctx.config.db.url === undefined) {
          throw new ConfigError(
            'grant-reader is not applicable to the embedded database (no DATABASE_URL): it has no roles; open it with `review-mirror sql` instead',
          );
        }
        await withDb(ctx, async (db) => {
          if (!(await roleExists(db.knex, role))) {
            throw new Error(
              `role "${role}" does not exist: create it first (create role ... login password ...)`,
            );
          }
          // The views and tables must exist for the grant to cover them.
          await migrate(db);
          await grantReader(db.knex, db.schema, role);
          process.stdout.write(
            `granted role "${role}" read access to schema ${db.schema}: usage, select on every table and view, and on those created later (webhooks.signing_secret withheld)\n`,
          );
        });
      }),
    );
}
