#!/bin/sh
echo nothing to fetch
