import { familyBudget } from '../budget.js';

familyBudget('lifecycle');
