// `npm run test:concurrent`: every test file but those run alone (test/alone.mocharc.cjs), two at a
// time (.mocharc.json).
module.exports = { ...require('../.mocharc.json'), spec: ['test/**/*.test.ts'], ignore: require('./alone.mocharc.cjs').spec };
