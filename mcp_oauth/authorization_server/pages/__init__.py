"""The pages a person sees: consent, connected apps, login."""
