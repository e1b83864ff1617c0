import type { Db } from '../db/connect.js';
import { storableText } from '../db/storableText.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { PartnerApi } from '../partner-api/client.js';
import { splitListed, type Webhook, type WebhookWithInexactId } from '../partner-api/webhooksSchema.js';
import { warnInexactIds, warnOnce } from './inexactIds.js';
import { registerWebhook } from './register.js';
import type { SigningSecrets } from './secrets.js';
import { listStoredWebhooks, markWebhookDeleted, recordListedWebhooks } from './webhooksSql.js';

export interface EnsurePlan {
  /**
   * The webhook to keep, when one of those listed can be kept. Undefined without `register`: none
   * can, and registering waits for a webhook with the URL whose id cannot be named (see planEnsure).
   */
  readonly keep: string | undefined;
  /** Register a new webhook for the URL (no usable one exists, and nothing holds it back). */
  readonly register: boolean;
  /** Other webhooks with the same URL, deleted after a registration succeeded. */
  readonly remove: readonly string[];
}

/**
 * Pure decision for "exactly one webhook with this URL". A webhook whose secret we stored is kept;
 * failing that, an existing one is kept only if the operator configured secrets (it is presumably
 * one of them); otherwise we cannot verify its deliveries, so a new one is registered and the
 * others removed. `storedWithSecret` holds ids as stored (see storableText): an id the platform
 * gives with U+0000 is compared in that form, or our own webhook would be taken for another's.
 *
 * A webhook listed with an id that cannot be named exactly (`inexact`) is neither kept nor
 * removed. One with the URL holds back a registration: it may be one we registered whose answer
 * had such an id (its secret could not be stored), and a platform giving every webhook such ids
 * would otherwise get one more of those, none deletable by us, at every health run.
 */
export function planEnsure(
  listed: readonly PlannedWebhook[],
  url: string,
  storedWithSecret: ReadonlySet<string>,
  haveConfiguredSecrets: boolean,
  inexact: readonly Pick<WebhookWithInexactId, 'url'>[] = [],
): EnsurePlan {
  const ours = (w: PlannedWebhook) => storedWithSecret.has(storableText(w.id));
  const target = comparableUrl(url);
  const atUrl = (w: { url?: string | undefined }) => w.url !== undefined && comparableUrl(w.url) === target;
  const matching = listed
    .filter(atUrl)
    // Events shown unreadably may be another subscription to the same URL: unless we registered
    // it, such a webhook is neither kept for review.created nor deleted as a duplicate.
    .filter((w) => w.events !== null || ours(w))
    .sort((a, b) => (a.created_at ?? '').localeCompare(b.created_at ?? '') || a.id.localeCompare(b.id));
  const keep = matching.filter(ours).at(-1)?.id ?? (haveConfiguredSecrets ? matching[0]?.id : undefined);
  // Duplicates are only removed beside a webhook that works: none is kept or registered here.
  if (keep === undefined && inexact.some(atUrl)) return { keep, register: false, remove: [] };
  return {
    keep,
    register: keep === undefined,
    remove: matching.filter((w) => w.id !== keep).map((w) => w.id),
  };
}

type PlannedWebhook = Pick<Webhook, 'id' | 'url' | 'created_at'> & { events?: Webhook['events'] };

/**
 * A URL as the platform may store it (WHATWG: host in lower case, default port dropped), so one
 * normalised on registration is still found; text that does not parse is compared as is.
 */
function comparableUrl(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}

export interface EnsureDeps {
  readonly api: Pick<PartnerApi, 'webhooks'>;
  readonly db: Db;
  readonly secrets: SigningSecrets;
  readonly log: Logger;
  readonly haveConfiguredSecrets: boolean;
  /**
   * Duplicates whose failed delete was already logged as a warning, kept by a caller that ensures
   * again and again (the health job, every few minutes): a refusal that lasts (a 4xx) would
   * otherwise repeat the same warning for ever, so later failures of one go to debug. Without it
   * every failure warns.
   */
  readonly warnedUndeletable?: Set<string>;
  /** What was warned of about listed webhooks whose id cannot be named (see warnInexactIds). */
  readonly warnedInexact?: Set<string>;
}

/** What `ensureRegistration` did: its plan, and the duplicates the platform did not delete. */
export interface EnsureOutcome extends EnsurePlan {
  /** Of `remove`, those whose delete failed: still on the platform, to be tried again later. */
  readonly undeleted: readonly string[];
}

/**
 * `run` with WEBHOOK_PUBLIC_URL: makes sure exactly one webhook with that URL exists. A duplicate
 * the platform does not delete is logged and left (see `undeleted`), never a failure: the webhook
 * kept has its secret stored and works, and a failure here would stop the health checks after it
 * at every run for as long as the platform refuses.
 */
export async function ensureRegistration(
  deps: EnsureDeps,
  url: string,
  signal?: AbortSignal,
): Promise<EnsureOutcome> {
  const { api, db, log } = deps;
  await deps.secrets.refresh(db);
  const { named: listed, inexact } = splitListed(deps.secrets.scrubListed(await api.webhooks.list(signal)));
  warnInexactIds(log, inexact, deps.warnedInexact);
  await recordListedWebhooks(db.knex, db, listed);
  // A list that does not show a webhook's URL: the one we stored for it (kept by the recording).
  const stored = await listStoredWebhooks(db.knex, db);
  const storedUrl = new Map(stored.map((w) => [w.id, w.url]));
  const withSecret = new Set(stored.filter((w) => w.signing_secret !== null).map((w) => w.id));
  const withUrl = listed.map((w) => ({ ...w, url: w.url ?? storedUrl.get(storableText(w.id)) }));
  const plan = planEnsure(withUrl, url, withSecret, deps.haveConfiguredSecrets, inexact);
  if (!plan.register && plan.keep === undefined) {
    log[warnOnce(deps.warnedInexact, `not registered\n${url}`)](
      'WEBHOOK_PUBLIC_URL not registered: a listed webhook with that URL has an id that cannot be named exactly (see the warning about it); it is registered at the first health run after that webhook is deleted by hand',
    );
  }
  if (plan.register) {
    const created = await registerWebhook(
      { webhooks: deps.secrets.scrubbingRegistrations(api.webhooks) },
      db,
      { url, description: 'review-mirror' },
      { signal },
    );
    log.info({ webhookId: created.id }, 'webhook registered for WEBHOOK_PUBLIC_URL');
  }
  const undeleted: string[] = [];
  for (const id of plan.remove) {
    try {
      await api.webhooks.delete(id, signal);
    } catch (error) {
      // Shutdown, not the platform's answer: the run stops here as anywhere else.
      if (signal?.aborted) throw error;
      undeleted.push(id);
      // The platform's text may echo a signing secret (the refused webhook's own): hidden as a
      // listed webhook's last_error is, before it is logged.
      const err = deps.secrets.scrub(describeError(error));
      log[warnOnce(deps.warnedUndeletable, id)](
        { webhookId: id, err },
        'duplicate webhook for WEBHOOK_PUBLIC_URL not deleted: tried again at the next health run (`review-mirror webhooks delete` deletes it by hand)',
      );
      continue;
    }
    await markWebhookDeleted(db.knex, db, id);
    deps.warnedUndeletable?.delete(id);
    log.info({ webhookId: id }, 'duplicate webhook for WEBHOOK_PUBLIC_URL deleted');
  }
  await deps.secrets.refresh(db);
  return { ...plan, undeleted };
}
