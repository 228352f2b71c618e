// Compares two directories of normalised templates with CDK's own diff engine
// (@aws-cdk/cloudformation-diff: the fullDiff and ResourceImpact integ-runner
// uses, backed by the CloudFormation resource specification's
// "Update requires: Replacement" data in @aws-cdk/aws-service-spec).
// Usage: node integ/diff.js <expected dir> <actual dir>; prints JSON:
// [{stack, status: same|changed|added|removed, report, destructive: [{logicalId, type, impact}]}]
'use strict';
const fs = require('fs');
const path = require('path');
const { fullDiff, formatDifferences, ResourceImpact } = require('@aws-cdk/cloudformation-diff');

const SUFFIX = '.template.json';
const DESTRUCTIVE = new Set([
  ResourceImpact.WILL_REPLACE, ResourceImpact.MAY_REPLACE,
  ResourceImpact.WILL_DESTROY, ResourceImpact.WILL_ORPHAN,
]);

function templates(dir) {
  const found = {};
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith(SUFFIX)).sort()) {
    found[name.slice(0, -SUFFIX.length)] = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
  }
  return found;
}

function compare(stack, expected, actual) {
  const diff = fullDiff(expected ?? {}, actual ?? {});
  const status = expected === undefined ? 'added' : actual === undefined ? 'removed'
    : diff.isEmpty ? 'same' : 'changed';
  const destructive = [];
  diff.resources.forEachDifference((logicalId, change) => {
    const impact = change.isRemoval ? ResourceImpact.WILL_DESTROY : change.changeImpact;
    if (DESTRUCTIVE.has(impact)) {
      destructive.push({ logicalId, type: change.oldValue?.Type ?? change.newValue?.Type, impact });
    }
  });
  let report = '';
  if (status !== 'same') {
    const out = { write: (chunk) => { report += chunk; return true; } };
    formatDifferences(out, diff);
  }
  return { stack, status, report, destructive };
}

const [expectedDir, actualDir] = process.argv.slice(2);
const expected = templates(expectedDir);
const actual = templates(actualDir);
const stacks = [...new Set([...Object.keys(expected), ...Object.keys(actual)])].sort();
process.stdout.write(JSON.stringify(stacks.map((s) => compare(s, expected[s], actual[s]))) + '\n');
