// Stylesheets are imported for their side effect; Vite bundles them into a hashed file.
declare module "*.css"
