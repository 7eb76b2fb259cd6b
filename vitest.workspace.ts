// One vitest project per package; `npm test` at the root runs them all.
export default ["packages/*"]
