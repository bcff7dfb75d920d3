"""Sign-in shared by the services: Cognito access-token checks (`tokens`) and the settings' variable names
(`env`, which the CDK app imports at synth time, so this package imports nothing heavy)."""
