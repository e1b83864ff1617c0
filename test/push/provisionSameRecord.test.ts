import { describe, expect, it } from 'vitest';
import type { Location } from '../../src/partner-api/locationsSchema.js';
import type { ProfessionalListItem } from '../../src/partner-api/professionalsSchema.js';
import { describesLocation, describesProfessional, madeSince } from '../../src/push/provision/sameRecord.js';

const location = (
  over: Partial<Omit<Location, 'address'>> & { address?: Partial<Location['address']> },
): Location => ({
  id: 1,
  slug: 'harbor',
  name: 'Harbor Office',
  active: true,
  profile_url: 'https://p/harbor',
  default_survey_url: null,
  created_at: '2026-11-27T08:00:00Z',
  ...over,
  address: { line1: '', line2: null, city: 'Brest', state: '', zip: '29200', ...over.address },
});

const professional = (over: Partial<ProfessionalListItem>): ProfessionalListItem => ({
  id: 'a',
  slug: 'ada-quay',
  first_name: 'Ada',
  last_name: 'Quay',
  active: true,
  profile_url: 'https://p/ada',
  default_survey_url: null,
  created_at: '2026-11-27T08:00:00Z',
  ...over,
});

describe('which listed record a provisioning row describes', () => {
  const sent = { name: 'Harbor Office', slug: 'harbor', city: 'Brest', zip: '29200' };

  it('takes a location of the same name and address, a field not sent being empty or null', () => {
    expect(describesLocation(sent, location({}))).toBe(true);
    // However the name was typed: decomposed accents, outer spaces.
    const accented = { ...sent, name: 'Café Harbor' };
    expect(describesLocation(accented, location({ name: ' Cafe\u0301 Harbor ' }))).toBe(true);
    // Inactive since: still the same location.
    expect(describesLocation(sent, location({ active: false }))).toBe(true);
  });

  it('does not take a location of another name, or of another address', () => {
    expect(describesLocation(sent, location({ name: 'Harbor Office 2' }))).toBe(false);
    expect(describesLocation(sent, location({ address: { city: 'Lorient' } }))).toBe(false);
    // A line the row does not give, which the platform's location has.
    expect(describesLocation(sent, location({ address: { line1: '1 Quay Street' } }))).toBe(false);
  });

  it('takes a professional by first and last name only', () => {
    const ada = { first_name: 'Ada', last_name: 'Quay' };
    expect(describesProfessional(ada, professional({ slug: 'other' }))).toBe(true);
    expect(describesProfessional(ada, professional({ last_name: 'Quai' }))).toBe(false);
  });

  it('finds what a lost create made only among the records listed since, and held by no other row', () => {
    const before = [location({ id: 1, slug: 'harbor-old' })];
    const after = [
      ...before,
      location({ id: 2, slug: 'harbor-x' }),
      location({ id: 3, slug: 'annex', name: 'Annex' }),
      location({ id: 4, slug: 'harbor-2' }),
    ];
    const matches = (l: Location) => describesLocation(sent, l);
    expect(madeSince(before, after, matches, () => false).map((l) => l.id)).toEqual([2, 4]);
    // harbor-2 is another row's slug.
    expect(madeSince(before, after, matches, (l) => l.slug === 'harbor-2').map((l) => l.id)).toEqual([2]);
  });
});
