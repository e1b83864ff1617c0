import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../../db/connect.js';
import { describeError } from '../../errors.js';
import { addCount, type RunCounts } from '../../jobs/runCounts.js';
import type { Logger } from '../../log.js';
import { upsertLocations, upsertProfessionals } from '../../mirror/directorySql.js';
import type { PartnerApi } from '../../partner-api/client.js';
import { ApiAuthError, ApiUnavailableError } from '../../partner-api/errors.js';
import type { Location } from '../../partner-api/locationsSchema.js';
import type { Professional, ProfessionalListItem } from '../../partner-api/professionalsSchema.js';
import type { RetryPolicy } from '../../partner-api/retryPolicy.js';
import { mapBounded } from '../../pull/mapBounded.js';
import { CreateUncertainError, createOnce } from './createOnce.js';
import { makeLandedLookups } from './landedLookups.js';
import type { LocationSpec, ProfessionalSpec, ProvisionPlan } from './provisionFile.js';
import { sameText } from './sameRecord.js';
import { readLocation, readProfessional } from './slugReads.js';

/**
 * created/existed/failed, or in a dry run: would-create/exists. A run cut short (a signal, the
 * platform or the database failing) reports the records it never started as not-attempted, and
 * those it had started without knowing how they ended as interrupted.
 */
export type ProvisionOutcome =
  | 'created'
  | 'existed'
  | 'failed'
  | 'would-create'
  | 'exists'
  | 'not-attempted'
  | 'interrupted';

/** The error of a record whose work was cut short: a create may have landed. */
const INTERRUPTED =
  'the run stopped before its outcome was known: a re-run finds it by its slug if it was created';

/** One line of the report: a record of the file, what happened to it, and its survey URL or error. */
export interface ProvisionResult {
  readonly kind: 'location' | 'professional';
  /** Its position in its list of the file. */
  readonly index: number;
  readonly record: string;
  /** The file's slug, or once found or created, the platform's (which may differ). */
  slug: string | null;
  outcome: ProvisionOutcome;
  id: string | null;
  survey_url: string | null;
  error: string | null;
}

export interface ProvisionDeps {
  readonly db: Db;
  readonly api: PartnerApi;
  readonly log: Logger;
}

export interface ProvisionOptions {
  readonly dryRun: boolean;
  /** How long to wait for new records' survey URLs; 0: do not wait. */
  readonly waitMs: number;
  /** Requests in flight at once. */
  readonly concurrency: number;
  /** The platform client's retry policy, which a create sent again after its answer was lost follows too (see createOnce). */
  readonly retry: RetryPolicy;
}

const SURVEY_POLL_FIRST_MS = 500;
const SURVEY_POLL_MAX_MS = 5_000;

type Found = { kind: 'location'; record: Location } | { kind: 'professional'; record: Professional };

/**
 * Creates the file's locations, then its professionals, each once: a record whose slug already
 * exists on the platform (read by that slug; the mirror is only a cache) is left alone, unless it
 * is a location found by a slug derived from its name and named otherwise: another location, so
 * the row fails. The platform may not keep the slug sent, so a location whose slug is not found but
 * whose name and address are on the platform is not created again (see `landedLookups`). A refused
 * record (409, 422, an unknown location) is reported with its reason and the rest go on. Then
 * waits, bounded, for every record's default_survey_url, stores what it read in the mirror's
 * tables, and returns one result per record of the file.
 */
export async function provision(
  deps: ProvisionDeps,
  plan: ProvisionPlan,
  options: ProvisionOptions,
  counts: RunCounts,
  signal?: AbortSignal,
  results: ProvisionResult[] = plannedResults(plan),
): Promise<ProvisionResult[]> {
  const { api } = deps;
  const resultFor = new Map<LocationSpec | ProfessionalSpec, ProvisionResult>();
  for (const spec of [...plan.locations, ...plan.professionals]) {
    const result = results.find((r) => r.kind === spec.kind && r.index === spec.index);
    if (result === undefined) throw new Error(`no result for ${spec.kind} ${spec.index} of the plan`);
    resultFor.set(spec, result);
  }
  const found = new Map<ProvisionResult, Found>();
  const claimed = new Set<string>();
  const lookups = makeLandedLookups(api, plan, (id) => claimed.has(id), signal);
  /** A record of the platform is this row's: found (`existed`, or `exists` in a dry run) or created. */
  const settleFound = (result: ProvisionResult, record: Found, outcome?: 'created') => {
    result.outcome = outcome ?? (options.dryRun ? 'exists' : 'existed');
    result.slug = record.record.slug;
    result.id = String(record.record.id);
    result.survey_url = record.record.default_survey_url;
    found.set(result, record);
    claimed.add(result.id);
  };

  const locationIds = new Map<string, number | undefined>();
  const failedLocations = new Map<string, string>();
  const locationResults = await mapBounded(
    plan.locations,
    options.concurrency,
    perRecord(signal, resultFor, async (spec, result) => {
      const existing = await readLocation(api, spec.body.slug, signal);
      if (existing !== undefined && spec.derivedSlug && !sameText(existing.name, spec.body.name)) {
        // Different names can derive one slug (a non-Latin name becomes `location`; a long one is
        // cut at 60 characters): reporting the other location would hand out its survey URL.
        fail(result, `slug ${spec.body.slug} belongs to location '${existing.name}'; give this row a slug`);
        return;
      }
      if (existing !== undefined) return settleFound(result, { kind: 'location', record: existing });
      // The platform may have given an earlier create of this row another slug (it does not say it
      // keeps the one sent): a location with the row's name and address is not made a second time.
      const alike = await lookups.locationsLike(spec);
      const [only] = alike;
      if (only !== undefined && alike.length === 1 && spec.derivedSlug) {
        return settleFound(result, { kind: 'location', record: only });
      }
      if (only !== undefined) return fail(result, alikeError(spec, alike));
      if (options.dryRun) {
        result.outcome = 'would-create';
        return;
      }
      const outcome = await createOnce(
        () => api.locations.create(spec.body, signal),
        await lookups.location(spec),
        { retry: options.retry, signal },
      );
      if ('error' in outcome) return fail(result, outcome.error);
      settleFound(result, { kind: 'location', record: outcome.record }, 'created');
    }),
  );
  for (const [i, result] of locationResults.entries()) {
    const slug = plan.locations[i]!.body.slug;
    if (result.outcome === 'failed') failedLocations.set(slug, `${result.record} failed`);
    else locationIds.set(slug, result.id === null ? undefined : Number(result.id));
  }

  /** The id of the location a professional names: one of the file's, or one already on the platform. */
  const locationOf = async (slug: string): Promise<{ id: number | undefined } | { error: string }> => {
    if (locationIds.has(slug)) return { id: locationIds.get(slug) };
    const failed = failedLocations.get(slug);
    if (failed !== undefined) return { error: `its location ${slug} was not created (${failed})` };
    const onPlatform = await readLocation(api, slug, signal);
    if (onPlatform === undefined) {
      const setAside = plan.setAsideLocations.get(slug);
      return {
        error:
          setAside === undefined
            ? `location ${slug} is neither in the file nor on the platform`
            : `its location ${slug} was not created (${setAside} is invalid)`,
      };
    }
    locationIds.set(slug, onPlatform.id);
    return { id: onPlatform.id };
  };

  await mapBounded(
    plan.professionals,
    options.concurrency,
    perRecord(signal, resultFor, async (spec, result) => {
      const existing = await readProfessional(api, spec.body.slug, signal);
      if (existing !== undefined) return settleFound(result, { kind: 'professional', record: existing });
      // Only a professional still to create needs its location to exist.
      const location = spec.location === undefined ? { id: undefined } : await locationOf(spec.location);
      if ('error' in location) return fail(result, location.error);
      if (options.dryRun) {
        result.outcome = 'would-create';
        return;
      }
      const outcome = await createOnce(
        () => api.professionals.create({ ...spec.body, location_id: location.id }, signal),
        await lookups.professional(spec),
        { retry: options.retry, signal },
      );
      if (!('error' in outcome))
        return settleFound(result, { kind: 'professional', record: outcome.record }, 'created');
      // The email taken (409): perhaps by this row's own record, made by an earlier run under a
      // slug other than the one sent. Only the operator can tell: the email is never returned.
      const namesakes = outcome.status === 409 ? await lookups.namesakes(spec) : [];
      fail(result, namesakes.length === 0 ? outcome.error : `${outcome.error}; ${namesakesHint(namesakes)}`);
    }),
  );

  if (!options.dryRun) {
    if (options.waitMs > 0) await waitForSurveyUrls(deps, found, options, signal);
    await storeInMirror(deps, [...found.values()]);
  }
  for (const r of results) addCount(counts, r.outcome);
  return results;
}

/**
 * One result per record of the file, in its order (its locations, then its professionals): the
 * invalid ones failed, the others not attempted yet. `provision` fills them in as it goes, so a
 * caller holding them can report a run cut short.
 */
export function plannedResults(plan: ProvisionPlan): ProvisionResult[] {
  const results: ProvisionResult[] = [
    ...plan.invalid.map((r) => ({
      kind: r.kind,
      index: r.index,
      record: r.label,
      slug: r.slug,
      outcome: 'failed' as const,
      id: null,
      survey_url: null,
      error: r.reason,
    })),
    ...[...plan.locations, ...plan.professionals].map(
      (spec): ProvisionResult => ({
        kind: spec.kind,
        index: spec.index,
        record: spec.label,
        slug: spec.body.slug,
        outcome: 'not-attempted',
        id: null,
        survey_url: null,
        error: null,
      }),
    ),
  ];
  return results.sort((a, b) => (a.kind === b.kind ? a.index - b.index : a.kind === 'location' ? -1 : 1));
}

/**
 * One record's work, whose failure (the platform unreachable even after retries) is that record's
 * alone: reported with its reason while the others go on. A refused key, a shutdown, or the
 * platform asking for less (see askedToWait) ends all.
 */
function perRecord<S extends LocationSpec | ProfessionalSpec>(
  signal: AbortSignal | undefined,
  resultFor: ReadonlyMap<LocationSpec | ProfessionalSpec, ProvisionResult>,
  work: (spec: S, result: ProvisionResult) => Promise<unknown>,
): (spec: S) => Promise<ProvisionResult> {
  // What ended the run: the workers still going take no other record, which stays not attempted.
  let stopped: unknown;
  return async (spec) => {
    const result = resultFor.get(spec)!;
    if (stopped !== undefined) throw stopped;
    signal?.throwIfAborted();
    // Until the work settles it, a report of a run cut short says the record may exist.
    result.outcome = 'interrupted';
    result.error = INTERRUPTED;
    try {
      await work(spec, result);
      if (result.error === INTERRUPTED) result.error = null;
    } catch (error) {
      if (signal?.aborted) {
        stopped ??= error;
        throw error;
      }
      // A refused key ends the run. A create of this record was lost before it: it may exist, so it
      // stays interrupted, for a re-run to find by its slug.
      if (error instanceof CreateUncertainError) {
        result.error = describeError(error);
        stopped ??= error.refusal;
        throw error.refusal;
      }
      if (askedToWait(error)) {
        // A 429 proves nothing was done with this record: not attempted, like those after it.
        result.outcome = 'not-attempted';
        result.error = describeError(error);
        stopped ??= error;
        throw error;
      }
      fail(result, describeError(error));
      // This record's own request was refused, so it was not created.
      if (error instanceof ApiAuthError) {
        stopped ??= error;
        throw error;
      }
    }
    return result;
  };
}

/**
 * The platform asks for less: a 429 its retries did not get through, or a Retry-After longer than
 * they wait (the route is then held off). Every record after it would meet the same and fail one
 * by one; the run stops instead, for a re-run once the wait is over, which finds what was created.
 */
function askedToWait(error: unknown): error is ApiUnavailableError {
  return error instanceof ApiUnavailableError && (error.status === 429 || error.retryAfterOutlastsRetries);
}

/** Why a location whose slug is not found is not created: one like it may be the row's own. */
function alikeError(spec: LocationSpec, alike: readonly Location[]): string {
  const which = alike.map((l) => `'${l.name}' (slug ${l.slug}, id ${l.id})`).join(', ');
  return `slug ${spec.body.slug} is not on the platform, but location ${which} ${alike.length === 1 ? 'has' : 'have'} this row's name and address: not created, since it may be this row's, made under another slug. Give this row the slug of the one to use, or another name or address for a new location`;
}

/** Professionals of the company who may be the one whose email is taken. */
function namesakesHint(namesakes: readonly ProfessionalListItem[]): string {
  const slugs = namesakes.map((p) => p.slug).join(', ');
  return `a professional of this name is on the platform (slug ${slugs}): if this row's, give it that slug`;
}

function fail(result: ProvisionResult, error: string): void {
  result.outcome = 'failed';
  result.error = error;
}

/**
 * Survey URLs appear a few seconds after a record is created (spec 3). Re-reads the records still
 * without one, backing off from half a second to five, until all have one or `waitMs` is over.
 */
async function waitForSurveyUrls(
  deps: ProvisionDeps,
  found: Map<ProvisionResult, Found>,
  options: ProvisionOptions,
  signal: AbortSignal | undefined,
): Promise<void> {
  const deadline = Date.now() + options.waitMs;
  // A re-read that hangs and is retried would hold the run for the client's whole retry budget: the
  // reads end with the wait, and one poll's grace for the round begun at its deadline.
  const readsEnd = AbortSignal.timeout(options.waitMs + SURVEY_POLL_MAX_MS);
  const readSignal = signal === undefined ? readsEnd : AbortSignal.any([signal, readsEnd]);
  let delayMs = SURVEY_POLL_FIRST_MS;
  for (;;) {
    const pending = [...found].filter(([result]) => result.survey_url === null);
    if (pending.length === 0) return;
    const leftMs = deadline - Date.now();
    if (leftMs <= 0) {
      for (const [result] of pending) {
        result.error = `its survey URL was not ready after ${Math.round(options.waitMs / 1000)} s: run again to print it`;
      }
      deps.log.warn({ pending: pending.length }, 'survey URLs not ready in time');
      return;
    }
    // The last round reads at the deadline: giving up a back-off step before it would report as
    // not ready, after the whole wait, a URL that came within it.
    await sleep(Math.min(delayMs, leftMs), undefined, { signal });
    delayMs = Math.min(SURVEY_POLL_MAX_MS, delayMs * 1.5);
    await mapBounded(pending, options.concurrency, async ([result, item]) => {
      try {
        const fresh: Found =
          item.kind === 'location'
            ? { kind: 'location', record: await deps.api.locations.get(item.record.slug, readSignal) }
            : {
                kind: 'professional',
                record: await deps.api.professionals.get(item.record.slug, readSignal),
              };
        found.set(result, fresh);
        result.survey_url = fresh.record.default_survey_url;
      } catch (error) {
        // Created already: a failed re-read only delays its URL to the next round.
        if (error instanceof ApiAuthError || signal?.aborted) throw error;
        deps.log.warn({ slug: item.record.slug, err: error }, 'could not re-read a new record');
      }
    });
  }
}

/** What the platform returned is the freshest the mirror can have: stored at once. */
async function storeInMirror(deps: ProvisionDeps, records: Found[]): Promise<void> {
  const { db } = deps;
  const locations = records.flatMap((f) => (f.kind === 'location' ? [f.record] : []));
  const professionals = records.flatMap((f) => (f.kind === 'professional' ? [f.record] : []));
  await upsertLocations(db.knex, db, locations);
  await upsertProfessionals(
    db.knex,
    db,
    professionals.map((p) => ({ item: p, detail: p })),
  );
}
