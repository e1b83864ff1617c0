import { Command, InvalidArgumentError, Option } from 'commander';
import { type Context, commandAction, withDb, withMirror } from '../context.js';
import type { Db } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { storableText } from '../db/storableText.js';
import { describeError } from '../errors.js';
import { makePartnerApi, type PartnerApi, partnerApiOptions } from '../partner-api/client.js';
import { ApiRequestError } from '../partner-api/errors.js';
import { type ListedWebhook, splitListed, type WebhookWithInexactId } from '../partner-api/webhooksSchema.js';
import { alignColumns } from '../status/alignColumns.js';
import { webhookState } from '../webhooks/health.js';
import { INEXACT_ID_HANDLING } from '../webhooks/inexactIds.js';
import { registerWebhook } from '../webhooks/register.js';
import { replayInbox } from '../webhooks/replay.js';
import { SigningSecrets } from '../webhooks/secrets.js';
import {
  listWebhookIdsWithSecret,
  markWebhookDeleted,
  recordListedWebhooks,
} from '../webhooks/webhooksSql.js';
import { timeOption } from './timeOption.js';

/**
 * Opens the API and the (migrated) database for one webhook command, the stored secrets known to
 * the scrubber first. A failure's text may quote the platform, which may echo any of them, and
 * src/cli.ts prints it scrubbed of the configured secrets only: it is scrubbed of these here.
 */
async function withApiAndDb<T>(
  ctx: Context,
  fn: (api: PartnerApi, db: Db, secrets: SigningSecrets) => Promise<T>,
): Promise<T> {
  const api = makePartnerApi(partnerApiOptions(ctx.config, ctx.log));
  try {
    return await withDb(ctx, async (db) => {
      await migrate(db);
      const secrets = await knownSecrets(ctx, db);
      try {
        return await fn(api, db, secrets);
      } catch (error) {
        const text = describeError(error);
        const scrubbed = secrets.scrub(text);
        throw scrubbed === text ? error : new Error(scrubbed);
      }
    });
  } finally {
    await api.close();
  }
}

/** The configured and the stored secrets: the platform may echo any of them in what it answers. */
async function knownSecrets(ctx: Context, db: Db): Promise<SigningSecrets> {
  const secrets = new SigningSecrets(ctx.config.webhook.secrets, ctx.scrubber);
  await secrets.refresh(db);
  return secrets;
}

/**
 * Prints what the platform answered, scrubbed again: its texts are scrubbed already, but not its
 * ids and URLs, which must stay as they are to be stored and compared.
 */
function print(ctx: Context, text: string): void {
  process.stdout.write(ctx.scrubber.scrub(text));
}

export interface WebhookListing {
  /** Null for a webhook whose id cannot be named exactly (see `id_problem`). */
  id: string | null;
  /** Why the id cannot be named, with the entry's place in the platform's list; else null. */
  id_problem: string | null;
  url: string;
  state: string;
  is_active: boolean | null;
  last_error: string | null;
  /** Whether the signing secret is stored here (registered by `webhooks register` or `run`). */
  secret_stored: boolean;
}

export function formatWebhooks(rows: readonly WebhookListing[]): string {
  if (rows.length === 0) return 'no webhook registered';
  const header = ['id', 'url', 'state', 'secret', 'last_error'];
  const table = rows.map((w) => [
    w.id ?? '?',
    w.url,
    w.state,
    w.secret_stored ? 'stored' : '-',
    w.last_error ?? '',
  ]);
  return alignColumns([header, ...table]).join('\n');
}

function webhookListing(w: ListedWebhook, withSecret: ReadonlySet<string>): WebhookListing {
  return {
    id: w.id ?? null,
    id_problem: w.id === undefined ? idProblem(w) : null,
    url: w.url ?? '',
    state: webhookState(w),
    is_active: w.is_active ?? null,
    last_error: w.last_error,
    secret_stored: w.id !== undefined && withSecret.has(storableText(w.id)),
  };
}

/** A listed webhook's unusable id, named by its place in the list, as a refused list names it. */
function idProblem(w: WebhookWithInexactId): string {
  return `webhooks[${w.position}].id ${w.idProblem}`;
}

/** `review-mirror webhooks register|list|delete`. */
export function webhooksCommand(): Command {
  const command = new Command('webhooks').description('register, list and delete webhooks on the platform');

  command
    .command('register')
    .description('register a webhook for review.created; its signing secret is stored in the database')
    .requiredOption('--url <url>', 'public HTTPS URL of the receiver (…/webhooks/review-created)')
    .option('--description <text>', 'label shown by the platform')
    .action(
      commandAction(async (ctx, opts: { url: string; description?: string }) => {
        await withApiAndDb(ctx, async (api, db, secrets) => {
          const webhook = await registerWebhook(
            { webhooks: secrets.scrubbingRegistrations(api.webhooks) },
            db,
            { url: opts.url, description: opts.description },
          );
          print(
            ctx,
            `registered webhook ${webhook.id} for ${webhook.url}\n` +
              `its signing secret is stored in ${db.table('webhooks')} (the platform shows it only once)\n`,
          );
        });
      }),
    );

  command
    .command('list')
    .description("show every webhook of the company with its state and the platform's last_error")
    .option('--json', 'print JSON instead of a table')
    .action(
      commandAction(async (ctx, opts: { json?: boolean }) => {
        await withApiAndDb(ctx, async (api, db, secrets) => {
          const answered = await api.webhooks.list();
          const listed = secrets.scrubListed(answered);
          const { named, inexact } = splitListed(listed);
          await recordListedWebhooks(db.knex, db, named);
          const withSecret = await listWebhookIdsWithSecret(db.knex, db);
          const rows = listed.map((w) => webhookListing(w, withSecret));
          print(ctx, opts.json ? `${JSON.stringify(rows, null, 2)}\n` : `${formatWebhooks(rows)}\n`);
          for (const w of inexact) {
            process.stderr.write(
              ctx.scrubber.scrub(
                `review-mirror: ${idProblem(w)}: this webhook${w.url === undefined ? '' : ` (${w.url})`} is ${INEXACT_ID_HANDLING}\n`,
              ),
            );
          }
        });
      }),
    );

  command
    .command('delete')
    .description('delete a webhook on the platform; its stored secret stops being accepted')
    .argument('<id>', 'webhook id (see `webhooks list`)')
    .action(
      commandAction(async (ctx, id: string) => {
        await withApiAndDb(ctx, async (api, db) => {
          let note = '';
          try {
            await api.webhooks.delete(id);
          } catch (error) {
            // Already gone on the platform (say, a retried delete): forget it here all the same.
            if (!(error instanceof ApiRequestError && error.status === 404)) throw error;
            note = ' (the platform no longer knew it)';
          }
          await markWebhookDeleted(db.knex, db, id);
          process.stdout.write(`deleted webhook ${id}${note}\n`);
        });
      }),
    );

  command
    .command('replay')
    .description(
      'apply stored deliveries again to the mirror (after a restore from an older backup); idempotent, no API call',
    )
    .addOption(new Option('--id <review-id>', "replay this review's delivery").argParser(reviewId))
    .addOption(
      new Option('--since <time>', 'replay deliveries received since this ISO 8601 time')
        .argParser(timeOption)
        .conflicts('id'),
    )
    .action(
      commandAction(async (ctx, opts: { id?: string; since?: Date }) => {
        const summary = await withMirror(ctx, async (db) => {
          await migrate(db);
          return replayInbox(db, { reviewId: opts.id, since: opts.since });
        });
        for (const u of summary.unreadable) {
          process.stderr.write(`review-mirror: webhook_inbox row ${u.id} no longer parses: ${u.reason}\n`);
        }
        process.stdout.write(
          `replayed ${summary.events} stored deliveries: ${summary.inserted} reviews inserted, ${summary.updated} updated (an older version changes nothing)${summary.unreadable.length > 0 ? `, ${summary.unreadable.length} unreadable` : ''}\n`,
        );
        if (opts.id !== undefined && summary.events === 0) {
          throw new Error(`webhooks replay: no stored delivery for review ${opts.id}`);
        }
        if (summary.unreadable.length > 0) process.exitCode = 1;
      }),
    );

  return command;
}

function reviewId(value: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) {
    throw new InvalidArgumentError('must be a review id (a UUID)');
  }
  return value.toLowerCase();
}
