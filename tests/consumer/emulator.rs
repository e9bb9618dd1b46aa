//! Starred consumer cases on the emulator.
