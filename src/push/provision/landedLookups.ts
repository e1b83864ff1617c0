import type { PartnerApi } from '../../partner-api/client.js';
import { ApiAuthError } from '../../partner-api/errors.js';
import type { Location } from '../../partner-api/locationsSchema.js';
import type { Professional, ProfessionalListItem } from '../../partner-api/professionalsSchema.js';
import type { LandedLookup } from './createOnce.js';
import { listEvery } from './listEvery.js';
import type { LocationSpec, ProfessionalSpec, ProvisionPlan } from './provisionFile.js';
import { describesLocation, describesProfessional, madeSince } from './sameRecord.js';
import { readLocation, readProfessional } from './slugReads.js';

/**
 * How one run finds its records beyond their slugs (which the platform may not keep): the listing
 * of each kind, taken once before the run's first create of that kind, and listed again after a
 * create whose answer was lost, whose record is then the one that appeared since with the fields
 * sent.
 */
export interface LandedLookups {
  /**
   * The locations already on the platform, under a slug no other row of the file has, with this
   * row's name and address: the row's own, if the platform gave it another slug.
   */
  locationsLike(spec: LocationSpec): Promise<Location[]>;
  /** Where a create of this location may have landed (the listing before it is taken by then). */
  location(spec: LocationSpec): Promise<LandedLookup<Location>>;
  /** The same for a professional: to call before its create, whose earlier listing it takes. */
  professional(spec: ProfessionalSpec): Promise<LandedLookup<Professional>>;
  /** The professionals listed before the first create with this row's name, under no other row's slug. */
  namesakes(spec: ProfessionalSpec): Promise<ProfessionalListItem[]>;
}

/** `claimed(id)`: a record another row of the file already holds (found or created). */
export function makeLandedLookups(
  api: PartnerApi,
  plan: ProvisionPlan,
  claimed: (id: string) => boolean,
  signal?: AbortSignal,
): LandedLookups {
  const listLocations = () => listEvery((a, c, s) => api.locations.pages(a, c, s), signal);
  const listProfessionals = () => listEvery((a, c, s) => api.professionals.pages(a, c, s), signal);
  const locationsBefore = once(listLocations);
  // A professional is never doubled whatever the listing says (the platform refuses a second of an
  // email): a listing failing only leaves a lost create's record to be found by its slug alone,
  // instead of holding back every professional of the file.
  const professionalsBefore = once(() =>
    listProfessionals().catch((error: unknown) => {
      if (signal?.aborted || error instanceof ApiAuthError) throw error;
      return undefined;
    }),
  );
  const locationSlugs = new Set(plan.locations.map((s) => s.body.slug));
  const professionalSlugs = new Set(plan.professionals.map((s) => s.body.slug));
  // Another row's record: its slug is another row's, or that row holds it already.
  const heldElsewhere =
    (slugs: ReadonlySet<string>, own: string) => (record: { id: string | number; slug: string }) =>
      (record.slug !== own && slugs.has(record.slug)) || claimed(String(record.id));

  return {
    locationsLike: async (spec) =>
      (await locationsBefore()).filter(
        (l) => describesLocation(spec.body, l) && !heldElsewhere(locationSlugs, spec.body.slug)(l),
      ),
    location: async (spec) => {
      const before = await locationsBefore();
      return {
        duplicateRefused: false,
        find: async () => {
          const bySlug = await readLocation(api, spec.body.slug, signal);
          if (bySlug !== undefined) return bySlug;
          const made = madeSince(
            before,
            await listLocations(),
            (l) => describesLocation(spec.body, l),
            heldElsewhere(locationSlugs, spec.body.slug),
          );
          return onlyOne(made, `locations named '${spec.body.name}' at this address`);
        },
      };
    },
    professional: async (spec) => {
      const before = await professionalsBefore();
      return {
        duplicateRefused: true,
        find: async () => {
          const bySlug = await readProfessional(api, spec.body.slug, signal);
          if (bySlug !== undefined || before === undefined) return bySlug;
          const made = madeSince(
            before,
            await listProfessionals(),
            (p) => describesProfessional(spec.body, p),
            heldElsewhere(professionalSlugs, spec.body.slug),
          );
          const item = onlyOne(made, `professionals named '${spec.body.first_name} ${spec.body.last_name}'`);
          // Only the single read carries location_id, which the mirror keeps.
          return item === undefined ? undefined : api.professionals.get(item.slug, signal);
        },
      };
    },
    namesakes: async (spec) =>
      ((await professionalsBefore()) ?? []).filter(
        (p) => describesProfessional(spec.body, p) && !heldElsewhere(professionalSlugs, spec.body.slug)(p),
      ),
  };
}

/** The one record a lost create made; several appearing at once cannot be told apart. */
function onlyOne<T extends { slug: string }>(made: readonly T[], what: string): T | undefined {
  if (made.length > 1) {
    throw new Error(`${made.length} ${what} appeared since (slugs ${made.map((r) => r.slug).join(', ')})`);
  }
  return made[0];
}

/** `load`, called once, when first needed: a failure stays that of every caller. */
function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => {
    loading ??= load();
    return loading;
  };
}
