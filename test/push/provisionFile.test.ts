import { describe, expect, it } from 'vitest';
import {
  derivedLocationSlug,
  derivedProfessionalSlug,
  parseProvisionFile,
} from '../../src/push/provision/provisionFile.js';

describe('the provisioning file', () => {
  it('reads YAML and JSON with the API field names, deriving the slugs the file leaves out', () => {
    const yaml = parseProvisionFile(`
locations:
  - name: Café de Flore
    address_1: 172 Bd Saint-Germain
    city: Paris
  - { name: Harbour, slug: harbour-1, active: false }
professionals:
  - first_name: Zoë
    last_name: Ångström
    email: Zoe@Example.com
    location: cafe-de-flore
`);
    expect(yaml.invalid).toEqual([]);
    expect(yaml.locations.map((l) => [l.body.slug, l.derivedSlug])).toEqual([
      ['cafe-de-flore', true],
      ['harbour-1', false],
    ]);
    expect(yaml.locations[0]!.body).toMatchObject({ name: 'Café de Flore', city: 'Paris' });
    expect(yaml.locations[1]!.body.active).toBe(false);
    const [zoe] = yaml.professionals;
    expect(zoe).toMatchObject({
      location: 'cafe-de-flore',
      derivedSlug: true,
      label: 'professionals[0] "Zoe@Example.com"',
    });
    expect(zoe!.body.slug).toMatch(/^zoe-angstrom-[0-9a-f]{6}$/);

    const json = parseProvisionFile(
      JSON.stringify({ professionals: [{ first_name: 'A', last_name: 'B', email: 'a@b.co' }] }),
    );
    expect(json.locations).toEqual([]);
    expect(json.professionals).toHaveLength(1);
  });

  it('derives a stable slug per person, never the same for two people of one name', () => {
    const a = derivedProfessionalSlug('John', 'Smith', 'john@one.example');
    expect(derivedProfessionalSlug('John', 'Smith', ' JOHN@one.example ')).toBe(a);
    expect(derivedProfessionalSlug('John', 'Smith', 'john@two.example')).not.toBe(a);
    expect(derivedProfessionalSlug('x'.repeat(80), 'y', 'e@x.co').length).toBeLessThanOrEqual(60);
    expect(derivedLocationSlug('  Downtown — Lyon 2e ')).toBe('downtown-lyon-2e');
  });

  it('sets aside each bad record with which record, which field and why, and keeps the others', () => {
    const plan = parseProvisionFile(`
locations:
  - name: Downtown
  - city: Lyon
  - name: Downtown
  - name: Uptown
    colour: blue
professionals:
  - { first_name: Ann, last_name: Lee, email: ann@example.com }
  - { first_name: Bob, last_name: Ray, email: not-an-email }
  - { first_name: Ann, last_name: Other, email: ANN@example.com }
  - { first_name: Cy, last_name: "", email: cy@example.com }
  - { first_name: Di, last_name: Ng, email: di@example.com, slug: shared }
  - { first_name: Ed, last_name: Ox, email: ed@example.com, slug: shared }
  - { first_name: Fa, last_name: Yu, email: fa@example.com, active: "yes" }
`);
    expect(plan.locations.map((l) => l.label)).toEqual(['locations[0] "Downtown"']);
    expect(plan.professionals.map((p) => p.label)).toEqual([
      'professionals[0] "ann@example.com"',
      'professionals[4] "di@example.com"',
    ]);
    expect(plan.invalid.map((r) => `${r.label}: ${r.reason}`)).toEqual([
      'locations[1]: name must be a string',
      `locations[2] "Downtown": slug downtown is already locations[0] "Downtown"'s: give one of them a slug of its own`,
      'locations[3] "Uptown": has an unknown field colour',
      'professionals[1] "not-an-email": email must be an email address',
      `professionals[2] "ANN@example.com": email ANN@example.com is already professionals[0] "ann@example.com"'s`,
      'professionals[3] "cy@example.com": last_name must not be empty',
      `professionals[5] "ed@example.com": slug shared is already professionals[4] "di@example.com"'s: give one of them a slug of its own`,
      'professionals[6] "fa@example.com": active must be true or false',
    ]);
  });

  it('sets aside a record whose slug, or location slug, holds half a character, which no URL can name', () => {
    const half =
      'holds half of a character (a lone UTF-16 surrogate), which cannot be stored: a slug names its record in URLs, and must be kept as sent';
    // YAML's escapes, as JSON's, can write half an emoji (an emoji cut in two by a truncation).
    const plan = parseProvisionFile(`
locations:
  - { name: Downtown }
  - { name: Uptown, slug: "uptown-\\ud83d" }
professionals:
  - { first_name: Ann, last_name: Lee, email: ann@example.com, location: downtown }
  - { first_name: Bob, last_name: Ray, email: bob@example.com, slug: "bob-\\ude00" }
  - { first_name: Cy, last_name: Oh, email: cy@example.com, location: "downtown\\ud83d" }
`);
    expect(plan.locations.map((l) => l.label)).toEqual(['locations[0] "Downtown"']);
    expect(plan.professionals.map((p) => p.label)).toEqual(['professionals[0] "ann@example.com"']);
    expect(plan.invalid.map((r) => `${r.label}: ${r.reason}`)).toEqual([
      `locations[1] "Uptown": slug ${half}`,
      `professionals[1] "bob@example.com": slug ${half}`,
      `professionals[2] "cy@example.com": location ${half}`,
    ]);

    const json = parseProvisionFile(
      JSON.stringify({ locations: [{ name: 'Harbour', slug: 'harbour-\ud83d' }] }),
    );
    expect(json.locations).toEqual([]);
    expect(json.invalid.map((r) => `${r.label}: ${r.reason}`)).toEqual([
      `locations[0] "Harbour": slug ${half}`,
    ]);
  });

  it('reads a list key with every entry commented out as an empty list, not a refused file', () => {
    // Commenting out every entry leaves `locations:` with no value, which YAML reads as null.
    const plan = parseProvisionFile(`
locations:
  # - name: Downtown Office
professionals:
  - { first_name: Ann, last_name: Lee, email: ann@example.com }
`);
    expect(plan.locations).toEqual([]);
    expect(plan.professionals.map((p) => p.label)).toEqual(['professionals[0] "ann@example.com"']);
    expect(plan.invalid).toEqual([]);

    const none = parseProvisionFile('locations:\n  - { name: Downtown }\nprofessionals:\n');
    expect(none.locations.map((l) => l.label)).toEqual(['locations[0] "Downtown"']);
    expect(none.professionals).toEqual([]);
    expect(parseProvisionFile(JSON.stringify({ locations: null, professionals: null })).invalid).toEqual([]);
  });

  it.each([
    ['locations: [a', /^the file is neither YAML nor JSON: /],
    ['- just a list', /^the file must be a mapping \(expected \{locations/],
    [
      'locations: {name: x}',
      /^the file locations must be a list \(expected \{locations: \[\.\.\.\], professionals: \[\.\.\.\]\}\)$/,
    ],
    ['staff: []', /^the file has an unknown field staff/],
  ])('refuses the whole file %j before anything is sent', (source, message) => {
    expect(() => parseProvisionFile(source)).toThrow(message);
  });
});
